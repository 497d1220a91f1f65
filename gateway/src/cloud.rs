//! Beside the request path: the cloud identities the credential step uses. AWS credentials
//! for SigV4 (static keys, or the gateway's own identity from the default chain, optionally a
//! role assumed through STS) and Google bearer tokens (a service-account key's JWT-bearer
//! grant, or the gateway's own application default credentials). Tokens and temporary
//! credentials are cached until shortly before they expire and fetched once for many
//! concurrent calls; the caches outlive snapshots.

pub mod aws;
pub mod cache;
pub mod google;

/// An error with the causes under it, for the admin who reads why a cloud gave no credential.
pub fn explain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let said = e.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = e.source();
    }
    text
}
