-- Act-as and sign-in identities (DESIGN §15, §24): an OpenID provider's email counts only when
-- its token says `email_verified: true`, unless the provider is marked as issuing only verified
-- emails (1).
ALTER TABLE actas_providers ADD COLUMN trust_unverified_email BIGINT NOT NULL DEFAULT 0;
