//! A connection whose writes are gathered until pingora flushes. Pingora writes a response's
//! header and its body separately and flushes where a response (or a streamed chunk) ends;
//! written straight through, a small answer cost two `send`s and two loopback packets. Here
//! the header and a body up to [`GATHER_LIMIT`] leave in one. Pingora's own listeners buffer
//! writes the same way (1,460 bytes); a connection accepted here has no such buffer.

use std::fmt::Debug;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use pingora::protocols::raw_connect::ProxyDigest;
use pingora::protocols::tls::{SslDigest, TlsRef};
use pingora::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, SocketDigest, Ssl,
    TimingDigest, UniqueID, UniqueIDType, ALPN,
};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

/// Most bytes held back; a larger write goes straight through (after what was held).
const GATHER_LIMIT: usize = 16 * 1024;

#[derive(Debug)]
pub struct Coalesced<S: AsyncWrite + Unpin> {
    inner: S,
    /// Written by pingora, not yet by the socket.
    pending: Vec<u8>,
    /// How much of `pending` the socket took already.
    sent: usize,
}

impl<S: AsyncWrite + Unpin> Coalesced<S> {
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            pending: Vec::new(),
            sent: 0,
        }
    }

    /// Hands everything held to the inner stream.
    fn poll_write_out(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.pending.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.pending[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.pending.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Coalesced<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.pending.len() + buf.len() > GATHER_LIMIT {
            ready!(this.poll_write_out(cx))?;
            if buf.len() >= GATHER_LIMIT {
                return Pin::new(&mut this.inner).poll_write(cx, buf);
            }
        }
        this.pending.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_write_out(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_write_out(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Coalesced<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // Never wait for the peer while holding what it waits for (pingora flushes at the end
        // of every response; this only guards against a path that does not).
        if this.sent < this.pending.len() {
            if let Poll::Ready(Err(e)) = this.poll_write_out(cx) {
                return Poll::Ready(Err(e));
            }
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> Drop for Coalesced<S> {
    fn drop(&mut self) {
        // What pingora's own buffered stream does: one last try that does not wait.
        if self.sent < self.pending.len() {
            let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
            let _ = self.poll_write_out(&mut cx);
        }
    }
}

#[async_trait]
impl<S: Shutdown + AsyncWrite + Unpin + Send> Shutdown for Coalesced<S> {
    async fn shutdown(&mut self) {
        if self.flush().await.is_ok() {
            Shutdown::shutdown(&mut self.inner).await;
        }
    }
}

impl<S: UniqueID + AsyncWrite + Unpin> UniqueID for Coalesced<S> {
    fn id(&self) -> UniqueIDType {
        self.inner.id()
    }
}

impl<S: Ssl + AsyncWrite + Unpin> Ssl for Coalesced<S> {
    fn get_ssl(&self) -> Option<&TlsRef> {
        self.inner.get_ssl()
    }

    fn get_ssl_digest(&self) -> Option<Arc<SslDigest>> {
        self.inner.get_ssl_digest()
    }

    fn selected_alpn_proto(&self) -> Option<ALPN> {
        self.inner.selected_alpn_proto()
    }
}

impl<S: GetTimingDigest + AsyncWrite + Unpin> GetTimingDigest for Coalesced<S> {
    fn get_timing_digest(&self) -> Vec<Option<TimingDigest>> {
        self.inner.get_timing_digest()
    }

    fn get_read_pending_time(&self) -> Duration {
        self.inner.get_read_pending_time()
    }

    fn get_write_pending_time(&self) -> Duration {
        self.inner.get_write_pending_time()
    }
}

impl<S: GetProxyDigest + AsyncWrite + Unpin> GetProxyDigest for Coalesced<S> {
    fn get_proxy_digest(&self) -> Option<Arc<ProxyDigest>> {
        self.inner.get_proxy_digest()
    }

    fn set_proxy_digest(&mut self, digest: ProxyDigest) {
        self.inner.set_proxy_digest(digest);
    }
}

impl<S: GetSocketDigest + AsyncWrite + Unpin> GetSocketDigest for Coalesced<S> {
    fn get_socket_digest(&self) -> Option<Arc<SocketDigest>> {
        self.inner.get_socket_digest()
    }

    fn set_socket_digest(&mut self, digest: SocketDigest) {
        self.inner.set_socket_digest(digest);
    }
}

#[async_trait]
impl<S: Peek + AsyncWrite + Unpin + Send> Peek for Coalesced<S> {
    async fn try_peek(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        self.inner.try_peek(buf).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records each write the socket would have seen.
    #[derive(Default)]
    struct Socket {
        writes: Vec<Vec<u8>>,
        flushes: usize,
    }

    impl AsyncWrite for Socket {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.get_mut().writes.push(buf.to_vec());
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.get_mut().flushes += 1;
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_header_and_a_small_body_leave_in_one_write_at_the_flush() {
        let mut c = Coalesced::new(Socket::default());
        c.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
            .await
            .unwrap();
        c.write_all(b"{}").await.unwrap();
        assert!(c.inner.writes.is_empty(), "nothing leaves before the flush");
        c.flush().await.unwrap();
        assert_eq!(
            c.inner.writes,
            [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}".to_vec()]
        );
        assert_eq!(c.inner.flushes, 1);
        c.write_all(b"next").await.unwrap();
        c.flush().await.unwrap();
        assert_eq!(
            c.inner.writes.len(),
            2,
            "the buffer is reused after a flush"
        );
        assert_eq!(c.inner.writes[1], b"next");
    }

    #[tokio::test]
    async fn what_is_held_leaves_before_a_read_and_at_shutdown() {
        use tokio::io::AsyncReadExt;
        let (ours, mut peer) = tokio::io::duplex(1024);
        let mut c = Coalesced::new(ours);
        c.write_all(b"unflushed").await.unwrap();
        peer.write_all(b"next request").await.unwrap();
        let mut buf = [0u8; 12];
        c.read_exact(&mut buf).await.unwrap();
        let mut got = [0u8; 9];
        // Bounded only so that a regression fails instead of hanging.
        tokio::time::timeout(Duration::from_secs(10), peer.read_exact(&mut got))
            .await
            .expect("the held bytes were written out")
            .unwrap();
        assert_eq!(&got, b"unflushed", "written out before waiting on the peer");

        c.write_all(b"last words").await.unwrap();
        AsyncWriteExt::shutdown(&mut c).await.unwrap();
        let mut rest = Vec::new();
        peer.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"last words");
    }

    #[tokio::test]
    async fn a_large_body_goes_straight_through_after_what_was_held() {
        let mut c = Coalesced::new(Socket::default());
        let body = vec![b'x'; GATHER_LIMIT + 1];
        c.write_all(b"header").await.unwrap();
        c.write_all(&body).await.unwrap();
        assert_eq!(c.inner.writes, [b"header".to_vec(), body]);
        c.flush().await.unwrap();
        assert_eq!(c.inner.writes.len(), 2, "nothing was left to write");
    }
}
