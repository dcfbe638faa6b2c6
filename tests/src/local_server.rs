//! An axum app served on 127.0.0.1 on a port of its own, until dropped:
//! what the fakes in this crate stand on.

use axum::Router;

pub struct LocalServer {
    /// `http://127.0.0.1:<port>`.
    pub base_url: String,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl LocalServer {
    pub async fn start(app: Router) -> anyhow::Result<LocalServer> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        Ok(LocalServer {
            base_url,
            shutdown: Some(tx),
        })
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}
