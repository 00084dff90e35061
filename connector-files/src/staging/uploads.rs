//! S3's list of multipart uploads in progress (`GET /bucket?uploads`), which `object_store`
//! does not offer: a restore aborts the uploads of this sink that no checkpoint refers to,
//! including one started just before a crash and never recorded anywhere. Signed with
//! [`rivus_aws::sigv4`].

use rivus_aws::sigv4::{self, Credentials, Request};
use rivus_sdk::{Error, Fault, Result};

use rivus_aws::s3::S3Client;

/// `(key, upload id)` of every upload in progress under `prefix`.
pub(crate) async fn list(
    http: &reqwest::Client,
    c: &S3Client,
    prefix: &str,
) -> Result<Vec<(String, String)>> {
    let cred = c
        .store
        .credentials()
        .get_credential()
        .await
        .map_err(|e| Error::client("files: S3 credentials", e.to_string(), Fault::Transient))?;
    let creds = Credentials {
        access_key: cred.key_id.clone(),
        secret_key: cred.secret_key.clone(),
        session_token: cred.token.clone(),
    };
    let mut out = Vec::new();
    let mut markers: Option<(String, String)> = None;
    loop {
        let mut query: Vec<(&str, &str)> = vec![("uploads", ""), ("prefix", prefix)];
        if let Some((k, u)) = &markers {
            query.push(("key-marker", k));
            query.push(("upload-id-marker", u));
        }
        let path = if c.bucket_path.is_empty() {
            "/".to_owned()
        } else {
            c.bucket_path.clone()
        };
        let req = Request {
            method: "GET",
            host: &c.host,
            path: &path,
            query: &query,
            headers: &[],
            payload_sha256: "UNSIGNED-PAYLOAD",
        };
        let signed = sigv4::sign(&creds, &c.region, "s3", &req, &sigv4::amz_date_now());
        let url = format!("{}{path}?{}", c.origin, sigv4::canonical_query(&query));
        let mut r = http.get(&url);
        for (k, v) in signed {
            r = r.header(k, v);
        }
        let what = || format!("files: listing the uploads of s3://{}/{prefix}", c.bucket);
        let resp = r
            .send()
            .await
            .map_err(|e| Error::client(what(), e.to_string(), Fault::Transient))?;
        let status = resp.status();
        let body = resp
            .text()
            .await
            .map_err(|e| Error::client(what(), e.to_string(), Fault::Transient))?;
        if !status.is_success() {
            return Err(Error::client(
                what(),
                format!("{status}: {body}"),
                Fault::of_http_status(status.as_u16()),
            ));
        }
        for upload in blocks(&body, "Upload") {
            if let (Some(k), Some(u)) = (field(upload, "Key"), field(upload, "UploadId")) {
                out.push((k, u));
            }
        }
        if field(&body, "IsTruncated").as_deref() != Some("true") {
            return Ok(out);
        }
        match (
            field(&body, "NextKeyMarker"),
            field(&body, "NextUploadIdMarker"),
        ) {
            (Some(k), Some(u)) => markers = Some((k, u)),
            _ => return Ok(out),
        }
    }
}

/// The contents of every `<tag>…</tag>` of `xml`.
fn blocks<'a>(xml: &'a str, tag: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(i) = rest.find(&open) {
        let after = &rest[i + open.len()..];
        let Some(j) = after.find(&close) else { break };
        out.push(&after[..j]);
        rest = &after[j + close.len()..];
    }
    out
}

/// The text of the first `<tag>` of `xml`, unescaped.
fn field(xml: &str, tag: &str) -> Option<String> {
    blocks(xml, tag).first().map(|t| {
        t.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uploads_are_read_from_the_listing() {
        let xml = "<ListMultipartUploadsResult><IsTruncated>true</IsTruncated>\
                   <NextKeyMarker>b</NextKeyMarker><NextUploadIdMarker>2</NextUploadIdMarker>\
                   <Upload><Key>a&amp;b/x.parquet</Key><UploadId>1</UploadId></Upload>\
                   <Upload><Key>b</Key><UploadId>2</UploadId></Upload></ListMultipartUploadsResult>";
        let ups: Vec<(Option<String>, Option<String>)> = blocks(xml, "Upload")
            .into_iter()
            .map(|u| (field(u, "Key"), field(u, "UploadId")))
            .collect();
        assert_eq!(ups[0], (Some("a&b/x.parquet".into()), Some("1".into())));
        assert_eq!(ups.len(), 2);
        assert_eq!(field(xml, "IsTruncated").as_deref(), Some("true"));
    }
}
