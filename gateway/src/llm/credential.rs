//! The credential step: how a member's upstream request is authenticated. Asynchronous,
//! because it may need a round trip (a Google token, AWS credentials of an assumed role) and
//! signs the exact bytes sent (SigV4).

use super::plan::Plan;
use crate::cloud::aws;
use crate::error::GatewayError;
use crate::llm::table::{AwsSource, Credential, GoogleSource, ModelEntry};
use crate::Gateway;

/// Adds the member's credential to an upstream request. The futures of token and credential
/// round trips (Google, AWS, OAuth) are boxed: inline, they made every call's future about
/// 8 KiB larger, copied on every request whatever its credential.
pub async fn authorize(
    gw: &Gateway,
    model: &ModelEntry,
    plan: &Plan,
    mut request: reqwest::RequestBuilder,
) -> Result<reqwest::RequestBuilder, GatewayError> {
    match &model.credential {
        Credential::None => Ok(request),
        Credential::Headers(headers) => {
            for (name, value) in headers {
                request = request.header(name, value);
            }
            Ok(request)
        }
        Credential::Google(source) => {
            let token = match source {
                GoogleSource::ServiceAccount(sa) => {
                    Box::pin(sa.token(&gw.http(), &model.name)).await?
                }
                GoogleSource::Gateway => Box::pin(gw.cloud.google.token(&model.name)).await?,
            };
            Ok(request.bearer_auth(token))
        }
        Credential::Aws { region, source } => {
            let credentials = match source {
                AwsSource::Keys(keys) => keys.clone(),
                AwsSource::Gateway(role) => {
                    Box::pin(gw.cloud.aws.credentials(role.as_deref(), &model.name)).await?
                }
            };
            // The signature covers the content type and the body, exactly as sent.
            let signed = [("content-type", "application/json")];
            for (name, value) in aws::sign(
                &credentials,
                region,
                &plan.url,
                &signed,
                &plan.body.contiguous(),
            )? {
                request = request.header(name, value);
            }
            Ok(request)
        }
        Credential::PerUser => {
            let headers = plan.user.as_ref().ok_or_else(|| {
                GatewayError::Internal(format!(
                    "model '{}': no person's credential was looked up",
                    model.name
                ))
            })?;
            for (name, value) in &headers.headers {
                request = request.header(name, value);
            }
            Ok(request)
        }
        Credential::SharedOAuth => {
            let owner = portcullis_shared::snapshot::CredentialOwner::Model;
            match Box::pin(gw.credentials.lookup(gw, owner, &model.id, ("", ""))).await? {
                Ok(headers) => {
                    for (name, value) in &headers.headers {
                        request = request.header(name, value);
                    }
                    Ok(request)
                }
                Err(_) => Err(GatewayError::Unsupported(format!(
                    "model '{}' is not connected: an administrator must complete its OAuth consent",
                    model.name
                ))),
            }
        }
        Credential::Unavailable(why) => Err(GatewayError::Unsupported(why.clone())),
    }
}
