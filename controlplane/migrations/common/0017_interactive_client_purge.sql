-- Interactive access (DESIGN §24): anyone may register a client, so a client no code was ever
-- issued to is deleted a day after it registered. `used_at` is when a code was first issued to
-- it (NULL: never); clients from before this column are kept while a grant or a consent names
-- them.
ALTER TABLE interactive_clients ADD COLUMN used_at BIGINT;

CREATE INDEX interactive_clients_unused ON interactive_clients (created_at) WHERE used_at IS NULL;
CREATE INDEX interactive_grants_client ON interactive_grants (client_id);
CREATE INDEX interactive_consents_client ON interactive_consents (client_id);
