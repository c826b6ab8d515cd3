//! A small HTTP/1.1 client for the demo and the tests: keep-alive connections, one call per
//! request, status, headers and the body as text. Every call is bounded in time.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// The answer to one request.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body, as text.
    pub body: String,
}

impl Reply {
    /// The header `name` (lower case), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON (`Null` if it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// The `error` field of a JSON body, if any.
    pub fn error_code(&self) -> Option<String> {
        self.json()
            .get("error")
            .and_then(|e| e.as_str())
            .map(str::to_owned)
    }
}

/// An HTTP client with a connection pool. Cheap to clone.
#[derive(Clone)]
pub struct HttpClient {
    client: Client<HttpConnector, Full<Bytes>>,
    timeout: Duration,
}

impl HttpClient {
    /// A client whose calls each give up after `timeout`.
    pub fn new(timeout: Duration) -> HttpClient {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        HttpClient { client, timeout }
    }

    /// Sends `method url` with an optional JSON body.
    ///
    /// # Errors
    /// A message when the server cannot be reached, or does not answer within the timeout.
    pub async fn send(
        &self,
        method: &str,
        url: &str,
        json: Option<&serde_json::Value>,
    ) -> Result<Reply, String> {
        let mut request = hyper::Request::builder().method(method).uri(url);
        let body = match json {
            Some(value) => {
                request = request.header("content-type", "application/json");
                Full::new(Bytes::from(value.to_string()))
            }
            None => Full::new(Bytes::new()),
        };
        let request = request
            .body(body)
            .map_err(|e| format!("bad request {method} {url}: {e}"))?;
        let call = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| format!("{method} {url}: {e}"))?;
            let status = response.status().as_u16();
            let headers = response
                .headers()
                .iter()
                .map(|(n, v)| {
                    (
                        n.as_str().to_owned(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| format!("{method} {url}: reading the body: {e}"))?
                .to_bytes();
            Ok(Reply {
                status,
                headers,
                body: String::from_utf8_lossy(&body).into_owned(),
            })
        };
        tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| format!("{method} {url}: no answer within {:?}", self.timeout))?
    }

    /// `GET url`.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub async fn get(&self, url: &str) -> Result<Reply, String> {
        self.send("GET", url, None).await
    }

    /// `POST url` without a body.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub async fn post(&self, url: &str) -> Result<Reply, String> {
        self.send("POST", url, None).await
    }

    /// `POST url` with a JSON body.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub async fn post_json(&self, url: &str, json: &serde_json::Value) -> Result<Reply, String> {
        self.send("POST", url, Some(json)).await
    }

    /// `PUT url` with a JSON body.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub async fn put_json(&self, url: &str, json: &serde_json::Value) -> Result<Reply, String> {
        self.send("PUT", url, Some(json)).await
    }
}
