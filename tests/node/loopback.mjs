// Preloaded into MCP servers from npm that the tests run: makes every server socket listen on
// 127.0.0.1 only (they bind all interfaces by default) and prints the bound address, so the
// test can use port 0 (`PORT=0`) and read the real port.
import net from 'node:net';

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' || typeof args[0] === 'string') {
    const callback = args.find((a) => typeof a === 'function');
    args = [args[0], '127.0.0.1', ...(callback ? [callback] : [])];
  } else if (args[0] && typeof args[0] === 'object' && !args[0].host && !args[0].path) {
    args[0] = { ...args[0], host: '127.0.0.1' };
  }
  this.once('listening', () => {
    const address = this.address();
    if (address && typeof address === 'object') {
      console.error(`listening addr=${address.address}:${address.port}`);
    }
  });
  return listen.apply(this, args);
};
