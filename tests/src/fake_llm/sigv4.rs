//! SigV4 verification as AWS documents it ("Create a signed AWS API request"), written
//! independently of the signer the gateway uses: the canonical request is rebuilt from the
//! request as received (method, path encoded once more, sorted query, the signed headers,
//! the SHA-256 of the body), signed with the secret of the access key the request names, and
//! compared with its signature. A request whose bytes changed after signing fails.

use std::collections::BTreeMap;

use axum::http::HeaderMap;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// Keys the fake accepts: access key id → (secret, session token it requires).
pub type Keys = BTreeMap<String, (String, Option<String>)>;

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
    mac.update(data.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// RFC 3986 encoding of everything but unreserved characters, as SigV4 wants it.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Checks a request's `Authorization` against `keys` for `service`; the error says why.
pub fn verify(
    keys: &Keys,
    service: &str,
    method: &str,
    path: &str,
    query: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<String, String> {
    let request = Request {
        method,
        path,
        query,
        headers,
        body,
    };
    verify_at(keys, service, &request, chrono::Utc::now())
}

pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a str,
    pub headers: &'a HeaderMap,
    pub body: &'a [u8],
}

/// [`verify`] as of `now` (a signature is good for 15 minutes either side).
fn verify_at(
    keys: &Keys,
    service: &str,
    r: &Request<'_>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<String, String> {
    let headers = r.headers;
    let (credential, signed, signature) = authorization(headers)?;
    let scope: Vec<&str> = credential.splitn(5, '/').collect();
    let [key_id, date, region, scope_service, "aws4_request"] = scope[..] else {
        return Err("IncompleteSignature: bad credential scope".into());
    };
    if scope_service != service {
        return Err(format!("SignatureDoesNotMatch: scoped to {scope_service}"));
    }
    let (secret, token) = keys
        .get(key_id)
        .ok_or_else(|| format!("UnrecognizedClientException: unknown key {key_id}"))?;
    if let Some(token) = token {
        let sent = headers
            .get("x-amz-security-token")
            .and_then(|v| v.to_str().ok());
        if sent != Some(token.as_str()) {
            return Err("InvalidSignatureException: wrong session token".into());
        }
    }
    let amz_date = headers
        .get("x-amz-date")
        .and_then(|v| v.to_str().ok())
        .ok_or("IncompleteSignature: no x-amz-date")?;
    let when = chrono::NaiveDateTime::parse_from_str(amz_date, "%Y%m%dT%H%M%SZ")
        .map_err(|_| "IncompleteSignature: bad x-amz-date")?
        .and_utc();
    if (now - when).num_seconds().abs() > 15 * 60 {
        return Err("InvalidSignatureException: signature expired".into());
    }
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{date}/{region}/{service}/aws4_request\n{}",
        hex::encode(Sha256::digest(canonical_request(r, &signed).as_bytes()))
    );
    let expected = hex::encode(hmac(&signing_key(secret, date, region, service), &to_sign));
    if expected != signature {
        return Err("SignatureDoesNotMatch: the request signature we calculated does not match the signature you provided".into());
    }
    Ok(key_id.to_string())
}

/// The key a secret signs with for one day, region and service.
fn signing_key(secret: &str, date: &str, region: &str, service: &str) -> Vec<u8> {
    let k_date = hmac(format!("AWS4{secret}").as_bytes(), date);
    let k_region = hmac(&k_date, region);
    let k_service = hmac(&k_region, service);
    hmac(&k_service, "aws4_request")
}

/// The `Credential`, `SignedHeaders` and `Signature` of an `AWS4-HMAC-SHA256` authorization.
fn authorization(headers: &HeaderMap) -> Result<(String, String, String), String> {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .ok_or("MissingAuthenticationToken")?;
    let rest = auth
        .strip_prefix("AWS4-HMAC-SHA256 ")
        .ok_or("IncompleteSignature: not AWS4-HMAC-SHA256")?;
    let field = |name: &str| {
        rest.split(", ")
            .find_map(|p| p.trim().strip_prefix(name))
            .map(str::to_string)
            .ok_or(format!("IncompleteSignature: no {name}"))
    };
    Ok((
        field("Credential=")?,
        field("SignedHeaders=")?,
        field("Signature=")?,
    ))
}

/// The canonical request: the method, the path encoded once more, the sorted query, the
/// `signed` headers (`;`-separated names) with their values, and the SHA-256 of the body.
fn canonical_request(r: &Request<'_>, signed: &str) -> String {
    let canonical_uri: Vec<String> = r.path.split('/').map(encode).collect();
    let mut pairs: Vec<(String, String)> = url::form_urlencoded::parse(r.query.as_bytes())
        .map(|(k, v)| (encode(&k), encode(&v)))
        .collect();
    pairs.sort();
    let canonical_query: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut canonical_headers = String::new();
    for name in signed.split(';') {
        let value = r
            .headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join(",");
        canonical_headers.push_str(&format!("{name}:{value}\n"));
    }
    format!(
        "{}\n{}\n{}\n{canonical_headers}\n{signed}\n{}",
        r.method,
        canonical_uri.join("/"),
        canonical_query.join("&"),
        hex::encode(Sha256::digest(r.body))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `get-vanilla` and `get-vanilla-query-order-key-case` of AWS's Signature Version 4 test
    /// suite: the verifier agrees with AWS's published signatures, not only with our signer.
    #[test]
    fn accepts_the_signatures_of_aws_test_suite_and_nothing_else() {
        let keys: Keys = [(
            "AKIDEXAMPLE".to_string(),
            ("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".to_string(), None),
        )]
        .into();
        let at = chrono::NaiveDate::from_ymd_opt(2015, 8, 30)
            .and_then(|d| d.and_hms_opt(12, 36, 0))
            .map(|t| t.and_utc())
            .unwrap();
        let check = |query: &str, signature: &str| {
            let mut headers = HeaderMap::new();
            headers.insert("host", "example.amazonaws.com".parse().unwrap());
            headers.insert("x-amz-date", "20150830T123600Z".parse().unwrap());
            let auth = format!("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature={signature}");
            headers.insert("authorization", auth.parse().unwrap());
            let request = Request {
                method: "GET",
                path: "/",
                query,
                headers: &headers,
                body: b"",
            };
            verify_at(&keys, "service", &request, at)
        };
        let vanilla = "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31";
        let ordered = "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500";
        assert_eq!(check("", vanilla), Ok("AKIDEXAMPLE".to_string()));
        assert_eq!(
            check("Param2=value2&Param1=value1", ordered),
            Ok("AKIDEXAMPLE".to_string())
        );
        assert!(
            check("Param1=value1", vanilla).is_err(),
            "a changed request fails"
        );
        assert!(check("", ordered).is_err());
    }
}
