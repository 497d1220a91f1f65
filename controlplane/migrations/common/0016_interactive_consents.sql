-- Interactive access (DESIGN §15, §24): a person's consent to let one MCP client use one agent
-- as them, given on the consent page after sign-in. While it stands, their later sign-ins from
-- that client for that agent skip the page; revoking a grant of theirs for the client and agent
-- deletes it, so the next sign-in asks again. `subject` is the person's `sub` at the agent's
-- OpenID provider.
CREATE TABLE interactive_consents (
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    subject       TEXT NOT NULL,
    client_id     TEXT NOT NULL,
    agent_id      TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    created_at    BIGINT NOT NULL,
    PRIMARY KEY (subject, client_id, agent_id)
);
