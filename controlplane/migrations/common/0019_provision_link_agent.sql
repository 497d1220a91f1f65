-- Provision links are bound to their person (DESIGN §24). `page` is the page the link was made
-- for: 'provision' (a person's own credential, asked for by an agent's call) or 'connect' (an
-- administrator's consent). A provision link is used only after its person signs in at the
-- OpenID provider of `agent_id`, the agent whose call made it. Links made before this have
-- neither and, when they name a person, are refused with a request for a new one.
ALTER TABLE provision_tokens ADD COLUMN page TEXT NOT NULL DEFAULT '';
ALTER TABLE provision_tokens ADD COLUMN agent_id TEXT NOT NULL DEFAULT '';
