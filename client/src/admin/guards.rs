//! Guards (`svc.rules.v1.RuleService`, DESIGN §16): what gateways block or redact in model
//! input and output and in tool arguments and results. Guards are named by id or name.

use portcullis_wire::api::guards::*;
use portcullis_wire::api::service::RULES;
use portcullis_wire::api::Empty;

use super::AdminClient;
use crate::error::ClientError;

impl AdminClient {
    /// `CreateGuard` (needs `rules.deploy`): the guard as stored, its scope as ids.
    pub async fn create_guard(&self, request: &CreateGuardRequest) -> Result<Guard, ClientError> {
        let reply: GuardResponse = self.call(RULES, "CreateGuard", request).await?;
        Ok(reply.guard)
    }

    /// `UpdateGuard` (needs `rules.deploy`): fields left `None` keep their value.
    pub async fn update_guard(&self, request: &UpdateGuardRequest) -> Result<Guard, ClientError> {
        let reply: GuardResponse = self.call(RULES, "UpdateGuard", request).await?;
        Ok(reply.guard)
    }

    /// `GetGuard`: one guard by id or name.
    pub async fn get_guard(&self, workspace_id: &str, guard: &str) -> Result<Guard, ClientError> {
        let reply: GuardResponse = self
            .call(RULES, "GetGuard", &guard_ref(workspace_id, guard))
            .await?;
        Ok(reply.guard)
    }

    /// `ListGuards`: the workspace's guards, or those of one stage.
    pub async fn list_guards(
        &self,
        workspace_id: &str,
        stage: Option<GuardStage>,
    ) -> Result<Vec<Guard>, ClientError> {
        let request = ListGuardsRequest {
            workspace_id: workspace_id.to_string(),
            stage,
        };
        let reply: ListGuardsResponse = self.call(RULES, "ListGuards", &request).await?;
        Ok(reply.guards)
    }

    /// `DeleteGuard` (needs `rules.deploy`).
    pub async fn delete_guard(&self, workspace_id: &str, guard: &str) -> Result<(), ClientError> {
        let _: Empty = self
            .call(RULES, "DeleteGuard", &guard_ref(workspace_id, guard))
            .await?;
        Ok(())
    }

    /// `TestGuard`: runs the stored guard on `sample` (at most 1 MiB) — what it finds, and
    /// what would be delivered.
    pub async fn test_guard(
        &self,
        workspace_id: &str,
        guard: &str,
        sample: &str,
    ) -> Result<TestGuardResponse, ClientError> {
        let request = TestGuardRequest {
            workspace_id: workspace_id.to_string(),
            guard_id: guard.to_string(),
            sample: sample.to_string(),
        };
        self.call(RULES, "TestGuard", &request).await
    }
}

fn guard_ref(workspace_id: &str, guard: &str) -> GuardRefRequest {
    GuardRefRequest {
        workspace_id: workspace_id.to_string(),
        guard_id: guard.to_string(),
    }
}
