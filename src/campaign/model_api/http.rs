//! JSON over HTTP(S) POST for the model APIs: one pooled client per
//! endpoint, rustls (ring) for https, a deadline on the whole exchange.

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::ApiError;

/// Answers larger than this are refused (a model's answer is far smaller).
const MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

#[derive(Clone)]
pub struct HttpClient {
    client: Client<Connector, Full<Bytes>>,
    timeout: Duration,
}

impl HttpClient {
    pub fn new(timeout: Duration) -> HttpClient {
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_webpki_roots()
            .https_or_http()
            .enable_http1()
            .build();
        HttpClient {
            client: Client::builder(TokioExecutor::new()).build(connector),
            timeout,
        }
    }

    /// POSTs `body` to `url`; the response's JSON, or what went wrong
    /// (classified: retry connection errors, 5xx and 429; not the rest).
    pub async fn post_json(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: Vec<u8>,
    ) -> Result<serde_json::Value, ApiError> {
        let mut request = hyper::Request::post(url).header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| ApiError::Fatal(format!("bad request to {url}: {e}")))?;
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| ApiError::Transient(format!("{url}: {e}")))?;
            let status = response.status();
            let body = http_body_util::Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
                .collect()
                .await
                .map_err(|e| ApiError::Transient(format!("{url}: reading the answer: {e}")))?
                .to_bytes();
            Ok::<_, ApiError>((status, body))
        };
        let (status, body) = tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| {
                ApiError::Transient(format!(
                    "{url}: no answer within {}s",
                    self.timeout.as_secs()
                ))
            })??;
        let text = String::from_utf8_lossy(&body);
        if status.as_u16() == 429 || status.is_server_error() {
            return Err(ApiError::Transient(format!(
                "{url}: HTTP {status}: {}",
                excerpt(&text)
            )));
        }
        if !status.is_success() {
            return Err(ApiError::Fatal(format!(
                "{url}: HTTP {status}: {}",
                excerpt(&text)
            )));
        }
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::Malformed(format!(
                "{url}: the answer is not JSON ({e}): {}",
                excerpt(&text)
            ))
        })
    }
}

fn excerpt(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}
