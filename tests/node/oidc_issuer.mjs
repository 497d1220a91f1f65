// A real OpenID provider for the end-to-end tests: `oidc-provider` on a loopback port, with
// issuer `http://127.0.0.1:<port>`, one confidential client (`portcullis-agent`,
// client_secret_post, authorization code + PKCE) and signing keys generated at startup (RS256
// `k1`, plus ES256 `e1` and EdDSA `d1`, all published in the JWKS). Prints
// `listening addr=127.0.0.1:<port>` on stderr once it answers.
//
// Test routes, answered before the provider sees the request (all JSON):
//   GET  /_test/id_token?sub=&email=&groups=a,b  {"id_token"}: runs the code + PKCE flow
//        against itself over HTTP (devInteractions login and consent) and returns the ID token
//        the provider issued.
//   GET  /_test/forge?kind=&sub=&email=&groups=&aud=  {"token"}: a token built with jose; kinds
//        valid, expired, wrong_aud, other_key, alg_none, other_issuer, not_yet, hs256, es256,
//        eddsa.
//   POST /_test/rotate  {"kid"}: a new RS256 key (k2, k3, …) replaces the current one, in the
//        JWKS, in issued tokens and in forged ones; the provider is rebuilt with it.
//   GET  /_test/stats  {"jwks_hits", "discovery_hits", "registrations", "refresh_grants",
//        "revocations", "introspections"}: requests to the JWKS and discovery document, dynamic
//        client registrations, refresh-token grants, revocations and introspections so far.
//   GET  /_test/browse?url=&login=&stop_at=&consent=&agent=&api_key=  {"status", "url", "body",
//        "headers"}: a
//        browser that opens `url` (any host), follows every redirect, logs in as `login` and
//        consents at this provider's pages, and returns the first other page it lands on; with
//        `stop_at`, a redirect to a URL starting with it is not followed but returned (status
//        302, `url`). With `consent` (`approve` or `deny`) it also answers Portcullis's consent
//        page (a form posting to `/oauth2/consent`) that way, with its cookies, choosing the
//        agent named `agent` when the page offers several. With `api_key` it fills in and posts
//        Portcullis's provision form (shown after the sign-in a provision link starts).
//        `headers` are the last page's (`set-cookie` a list).
//   POST /_test/access_ttl?seconds=  {}: the lifetime of access tokens issued for resource
//        servers from now on (default 3600).
//   POST /_test/refuse_refresh  {}: from now on every refresh-token grant is answered 400
//        `invalid_grant`, as when a user revoked the application at the provider.
//   POST /_test/unverified?sub=  {}: from now on the ID tokens of `sub` carry their email
//        without `email_verified` (every other person's, and forged tokens, say `true`).
//
// As an OAuth authorization server for MCP servers it has: dynamic client registration
// (open, RFC 7591), refresh tokens for every client allowed the grant, revocation (revoking a
// refresh token ends its grant and every token of it), resource indicators (RFC 8707: any
// absolute URL is a resource server with scope `tools`, opaque access tokens) and
// introspection, where resource servers authenticate as `portcullis-rs` /
// `portcullis-rs-secret`.
//
// Packages come from `$PORTCULLIS_NPM_DIR/node_modules` (default
// `~/.cache/portcullis-npm/node_modules`), where `scripts/test` installs tests/node/package.json.
// Exits on SIGTERM/SIGINT, when a piped or terminal stdin closes, and when its parent dies.
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const npmDir = process.env.PORTCULLIS_NPM_DIR || path.join(os.homedir(), '.cache/portcullis-npm');
const require = createRequire(path.join(path.resolve(npmDir), 'package.json'));
// Both packages are ESM-only: resolve their entry points from the npm dir, then import them.
const load = (name) => import(pathToFileURL(require.resolve(name)).href);
const jose = await load('jose');
const { default: Provider } = await load('oidc-provider');

const CLIENT_ID = 'portcullis-agent';
const CLIENT_SECRET = 'portcullis-agent-secret';
const RESOURCE_SERVER_ID = 'portcullis-rs';
const RESOURCE_SERVER_SECRET = 'portcullis-rs-secret';
const DISCOVERY_PATH = '/.well-known/openid-configuration';
const JWKS_PATH = '/jwks';

// --- keys -------------------------------------------------------------------------------

async function generate(alg, kid) {
  const { privateKey } = await jose.generateKeyPair(alg, { extractable: true });
  const jwk = await jose.exportJWK(privateKey);
  return { kid, alg, privateKey, jwk: { ...jwk, kid, alg, use: 'sig' } };
}

let rsaSerial = 1;
let current = await generate('RS256', `k${rsaSerial}`);
const es256 = await generate('ES256', 'e1');
const eddsa = await generate('EdDSA', 'd1');

// --- the provider -----------------------------------------------------------------------

// What /_test/id_token asked for, by login, read by findAccount.
const requested = new Map();
let issuer;
let redirectUri;
let handler;
let jwksHits = 0;
let discoveryHits = 0;
let registrations = 0;
let refreshGrants = 0;
let revocations = 0;
let introspections = 0;
let accessTtl = 3600;
let refuseRefresh = false;
// Logins whose ID tokens leave `email_verified` out.
const unverified = new Set();

function buildProvider() {
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: CLIENT_ID,
        client_secret: CLIENT_SECRET,
        redirect_uris: [redirectUri],
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_post',
        id_token_signed_response_alg: 'RS256',
      },
      {
        client_id: RESOURCE_SERVER_ID,
        client_secret: RESOURCE_SERVER_SECRET,
        redirect_uris: [],
        grant_types: [],
        response_types: [],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    jwks: { keys: [current.jwk, es256.jwk, eddsa.jwk] },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], groups: ['groups'] },
    scopes: ['openid', 'email', 'groups'],
    // Claims of the granted scopes go in the ID token, not only in userinfo.
    conformIdTokenClaims: false,
    pkce: { required: () => true },
    // Set so the provider does not print a notice for each default it falls back on.
    ttl: {
      // A resource server's tokens live as long as /_test/access_ttl says.
      AccessToken: (ctx, token) => token.resourceServer?.accessTokenTTL ?? 3600,
      Grant: 3600, IdToken: 3600, Interaction: 600, Session: 3600, RefreshToken: 86400,
    },
    features: {
      devInteractions: { enabled: true },
      registration: { enabled: true },
      revocation: { enabled: true },
      introspection: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => undefined,
        useGrantedResource: () => true,
        getResourceServerInfo: () => ({
          scope: 'tools',
          accessTokenFormat: 'opaque',
          accessTokenTTL: accessTtl,
        }),
      },
    },
    // Every client allowed the grant gets a refresh token, not only `offline_access` ones.
    issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
    async findAccount(ctx, sub) {
      const wanted = requested.get(sub) ?? {};
      return {
        accountId: sub,
        async claims() {
          return {
            sub,
            email: wanted.email ?? `${sub}@example.com`,
            ...(unverified.has(sub) ? {} : { email_verified: true }),
            groups: wanted.groups ?? [],
          };
        },
      };
    },
  });
  provider.on('server_error', (ctx, err) => console.error('oidc-provider server_error:', err));
  provider.on('grant.success', (ctx) => {
    if (ctx.oidc.params.grant_type === 'refresh_token') refreshGrants += 1;
  });
  return provider.callback();
}

// --- the code + PKCE flow, over HTTP against this server --------------------------------

const b64url = (bytes) => Buffer.from(bytes).toString('base64url');

// A cookie jar and `fetch` that keeps it, never following redirects itself.
function browser() {
  const jar = new Map();
  const cookieHeader = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  const remember = (response) => {
    for (const line of response.headers.getSetCookie()) {
      const [pair, ...attributes] = line.split(';').map((s) => s.trim());
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq);
      const value = pair.slice(eq + 1);
      const expired = attributes.some((a) => {
        const [k, v] = a.split('=');
        return (k.toLowerCase() === 'max-age' && Number(v) <= 0)
          || (k.toLowerCase() === 'expires' && Date.parse(v) <= Date.now());
      });
      if (expired || value === '') jar.delete(name);
      else jar.set(name, value);
    }
  };
  const request = async (url, init = {}) => {
    const response = await fetch(new URL(url, issuer), {
      ...init,
      redirect: 'manual',
      headers: { ...init.headers, cookie: cookieHeader() },
    });
    remember(response);
    return response;
  };

  return request;
}

// Follows redirects from `response`, logging in as `login` and consenting at this provider's
// interaction pages, until a redirect to `stopAt` (returned as a URL) or another page (returned
// as the response, with its URL).
async function follow(request, response, url, login, stopAt) {
  for (let step = 0; step < 30; step++) {
    if (response.status >= 300 && response.status < 400) {
      const location = new URL(response.headers.get('location'), url);
      if (stopAt && location.href.startsWith(stopAt)) return { redirect: location };
      url = location;
      response = await request(location);
      continue;
    }
    const interaction = url.href.startsWith(`${issuer}/interaction/`);
    if (!interaction) return { response, url };
    const html = await response.text();
    if (response.status !== 200) {
      throw new Error(`unexpected ${response.status} from the flow: ${html.slice(0, 500)}`);
    }
    const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
    const prompt = /name="prompt" value="([^"]+)"/.exec(html)?.[1];
    if (!action || !prompt) throw new Error(`no interaction form in: ${html.slice(0, 500)}`);
    const form = new URLSearchParams({ prompt });
    if (prompt === 'login') {
      form.set('login', login);
      form.set('password', 'any');
    }
    url = new URL(action.replaceAll('&amp;', '&'), issuer);
    response = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
    });
  }
  throw new Error('the flow did not end after 30 steps');
}

// Portcullis's consent form in `html` answered with `decision` (choosing the agent named
// `agent` when it offers several), or undefined when the page has none.
function consentForm(html, decision, agent) {
  const action = /<form method="post" action="([^"]+\/oauth2\/consent)"/.exec(html)?.[1];
  if (!action) return undefined;
  const unescape = (s) => s.replaceAll('&quot;', '"').replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&amp;', '&');
  const fields = new URLSearchParams({ decision });
  for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) {
    fields.set(m[1], unescape(m[2]));
  }
  const options = [...html.matchAll(/<input type="radio" name="agent" value="([^"]+)"[^>]*> <b>([^<]*)<\/b>/g)];
  if (options.length > 0) {
    const picked = options.find((m) => unescape(m[2]) === agent) ?? (agent ? undefined : options[0]);
    if (!picked) throw new Error(`no agent ${agent} on the consent page: ${html.slice(0, 800)}`);
    fields.set('agent', unescape(picked[1]));
  }
  return { action: unescape(action), fields };
}

// Portcullis's provision form in `html` (after its sign-in) filled in with `apiKey`, or
// undefined when the page has none.
function keyForm(html, apiKey) {
  const action = /<form method="post" action="([^"]+\/provision\/[^"]+)"/.exec(html)?.[1];
  if (!action) return undefined;
  const fields = new URLSearchParams({ api_key: apiKey });
  for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) {
    fields.set(m[1], m[2]);
  }
  return { action: action.replaceAll('&amp;', '&'), fields };
}

async function runCodeFlow(sub) {
  const request = browser();
  const verifier = b64url(randomBytes(32));
  const challenge = b64url(createHash('sha256').update(verifier).digest());
  const state = b64url(randomBytes(16));
  const nonce = b64url(randomBytes(16));
  const auth = new URL('/auth', issuer);
  auth.search = new URLSearchParams({
    client_id: CLIENT_ID,
    response_type: 'code',
    scope: 'openid email groups',
    redirect_uri: redirectUri,
    state,
    nonce,
    code_challenge: challenge,
    code_challenge_method: 'S256',
  }).toString();

  const end = await follow(request, await request(auth), auth, sub, redirectUri);
  if (!end.redirect) throw new Error(`the flow ended at ${end.url} (${end.response.status})`);
  const location = end.redirect;
  const error = location.searchParams.get('error');
  if (error) {
    throw new Error(`authorization failed: ${error}: ${location.searchParams.get('error_description')}`);
  }
  if (location.searchParams.get('state') !== state) throw new Error('state mismatch');
  const code = location.searchParams.get('code');
  if (!code) throw new Error('the flow did not reach the redirect_uri');

  const token = await fetch(new URL('/token', issuer), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      redirect_uri: redirectUri,
      code_verifier: verifier,
      client_id: CLIENT_ID,
      client_secret: CLIENT_SECRET,
    }).toString(),
  });
  const body = await token.json();
  if (!token.ok || !body.id_token) throw new Error(`token endpoint: ${token.status} ${JSON.stringify(body)}`);
  return body.id_token;
}

// --- forged tokens ----------------------------------------------------------------------

class BadRequest extends Error {}

async function forge(params) {
  const kind = params.get('kind') || 'valid';
  const sub = params.get('sub') || 'alice';
  const now = Math.floor(Date.now() / 1000);
  const claims = {
    email: params.get('email') || `${sub}@example.com`,
    email_verified: true,
    groups: splitGroups(params.get('groups')),
  };
  let iss = issuer;
  let aud = params.get('aud') || CLIENT_ID;
  let iat = now;
  let nbf = now;
  let exp = now + 300;
  let alg = 'RS256';
  let { kid } = current;
  let key = current.privateKey;

  switch (kind) {
    case 'valid':
      break;
    case 'expired':
      iat = now - 7200;
      nbf = iat;
      exp = now - 3600;
      break;
    case 'wrong_aud':
      aud = 'someone-else';
      break;
    case 'other_key':
      key = (await jose.generateKeyPair('RS256')).privateKey;
      break;
    case 'alg_none': {
      const header = { alg: 'none', typ: 'JWT', kid };
      const payload = { ...claims, sub, iss, aud, iat, nbf, exp };
      return `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(payload))}.`;
    }
    case 'other_issuer':
      iss = 'http://127.0.0.1:1/other';
      break;
    case 'not_yet':
      nbf = now + 3600;
      break;
    case 'hs256':
      alg = 'HS256';
      key = new TextEncoder().encode('secret');
      break;
    case 'es256':
      ({ alg, kid, privateKey: key } = es256);
      break;
    case 'eddsa':
      ({ alg, kid, privateKey: key } = eddsa);
      break;
    default:
      throw new BadRequest(`unknown forge kind ${kind}`);
  }

  return new jose.SignJWT(claims)
    .setProtectedHeader({ alg, typ: 'JWT', kid })
    .setSubject(sub)
    .setIssuer(iss)
    .setAudience(aud)
    .setIssuedAt(iat)
    .setNotBefore(nbf)
    .setExpirationTime(exp)
    .sign(key);
}

function splitGroups(value) {
  return value ? value.split(',').map((g) => g.trim()).filter(Boolean) : [];
}

// --- the HTTP server --------------------------------------------------------------------

function json(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(text);
}

async function testRoute(req, res, url) {
  const route = `${req.method} ${url.pathname}`;
  switch (route) {
    case 'GET /_test/id_token': {
      const sub = url.searchParams.get('sub') || 'alice';
      requested.set(sub, {
        email: url.searchParams.get('email') || `${sub}@example.com`,
        groups: splitGroups(url.searchParams.get('groups')),
      });
      return json(res, 200, { id_token: await runCodeFlow(sub) });
    }
    case 'GET /_test/forge':
      return json(res, 200, { token: await forge(url.searchParams) });
    case 'POST /_test/rotate':
      rsaSerial += 1;
      current = await generate('RS256', `k${rsaSerial}`);
      handler = buildProvider();
      return json(res, 200, { kid: current.kid });
    case 'GET /_test/stats':
      return json(res, 200, {
        jwks_hits: jwksHits,
        discovery_hits: discoveryHits,
        registrations,
        refresh_grants: refreshGrants,
        revocations,
        introspections,
      });
    case 'GET /_test/browse': {
      const start = new URL(url.searchParams.get('url') || '');
      const stopAt = url.searchParams.get('stop_at') || undefined;
      const login = url.searchParams.get('login') || 'alice';
      const consent = url.searchParams.get('consent') || undefined;
      const agent = url.searchParams.get('agent') || undefined;
      const apiKey = url.searchParams.get('api_key') || undefined;
      const request = browser();
      let end = await follow(request, await request(start), start, login, stopAt);
      for (let step = 0; step < 3; step++) {
        if (end.redirect) return json(res, 200, { status: 302, url: end.redirect.href, body: '' });
        const body = await end.response.text();
        const form = (consent && consentForm(body, consent, agent)) || (apiKey && keyForm(body, apiKey));
        if (!form) {
          const headers = Object.fromEntries(end.response.headers);
          headers['set-cookie'] = end.response.headers.getSetCookie();
          return json(res, 200, { status: end.response.status, url: end.url.href, body, headers });
        }
        const action = new URL(form.action, end.url);
        const posted = await request(action, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: form.fields.toString(),
        });
        end = await follow(request, posted, action, login, stopAt);
      }
      throw new Error('the consent page came back three times');
    }
    case 'POST /_test/refuse_refresh':
      refuseRefresh = true;
      return json(res, 200, {});
    case 'POST /_test/unverified':
      unverified.add(url.searchParams.get('sub') || '');
      return json(res, 200, {});
    case 'POST /_test/access_ttl':
      accessTtl = Number(url.searchParams.get('seconds'));
      if (!(accessTtl > 0)) throw new BadRequest('seconds must be a positive number');
      return json(res, 200, {});
    default:
      return json(res, 404, { error: `no test route ${route}` });
  }
}

// With /_test/refuse_refresh: a refresh-token grant is refused; any other token request too
// (its body is read here), which the tests do not make after refusing.
function refuseRefreshGrant(req, res) {
  let body = '';
  req.on('data', (chunk) => { body += chunk; });
  req.on('end', () => {
    const grant = new URLSearchParams(body).get('grant_type');
    json(res, 400, {
      error: grant === 'refresh_token' ? 'invalid_grant' : 'invalid_request',
      error_description: 'the test provider refuses token requests now',
    });
  });
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://127.0.0.1');
  if (url.pathname.startsWith('/_test/')) {
    testRoute(req, res, url).catch((err) => {
      console.error(`${req.method} ${url.pathname} failed:`, err);
      if (!res.headersSent) {
        json(res, err instanceof BadRequest ? 400 : 500, { error: String(err?.stack ?? err) });
      }
      else res.end();
    });
    return;
  }
  if (refuseRefresh && req.method === 'POST' && url.pathname === '/token') {
    refuseRefreshGrant(req, res);
    return;
  }
  if (url.pathname === JWKS_PATH) jwksHits += 1;
  if (url.pathname === DISCOVERY_PATH) discoveryHits += 1;
  if (req.method === 'POST' && url.pathname === '/reg') registrations += 1;
  if (url.pathname === '/token/revocation') revocations += 1;
  if (url.pathname === '/token/introspection') introspections += 1;
  handler(req, res);
});

// Idle connections stay open as long as behind a typical proxy (Node's default is 5 s), so the
// gateway's and control plane's pooled clients do not race the close between two tests' steps.
server.keepAliveTimeout = 75_000;
server.headersTimeout = 76_000;

server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  issuer = `http://127.0.0.1:${port}`;
  redirectUri = `${issuer}/cb`;
  handler = buildProvider();
  console.error(`listening addr=127.0.0.1:${port}`);
});

// --- shutdown ---------------------------------------------------------------------------

for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
  process.on(signal, () => process.exit(0));
}
// A null stdin (/dev/null, as the Rust harness spawns it) ends at once: only watch a pipe,
// socket or terminal.
const stdin = fs.fstatSync(0);
if (stdin.isFIFO() || stdin.isSocket() || process.stdin.isTTY) {
  process.stdin.on('end', () => process.exit(0));
  process.stdin.on('close', () => process.exit(0));
  process.stdin.resume();
}
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) process.exit(0);
}, 1000);
