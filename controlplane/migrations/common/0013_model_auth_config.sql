-- OAuth client settings of a model connection (auth_method oauth), as tools have them; the
-- client secret is sealed among the credentials.
ALTER TABLE model_connections ADD COLUMN auth_config TEXT NOT NULL DEFAULT '{}';
