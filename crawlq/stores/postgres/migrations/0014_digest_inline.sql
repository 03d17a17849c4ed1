-- crawlq_digest inlined by the planner (issue 19). 0005's body, sha256(convert_to(t,
-- 'UTF8')), is only STABLE (convert_to is), and the planner inlines a SQL function only
-- when its body is no more volatile than the function says it is: every call (two for
-- each inserted job with a key and a limit key, one for each key front picked, one for
-- each key record written) ran the SQL function's executor, about 1.6 us each here
-- (200,000 calls: 623 ms against 306 inlined). On a database whose server encoding is
-- UTF8, a text's bytes are its UTF-8 bytes, and decode(..., 'escape') of the text with
-- its backslashes doubled returns them: the same digest from IMMUTABLE functions only,
-- so the indexes on it (crawlq_keys by digest, crawlq_jobs by key_digest and
-- limit_digest) stay valid and nothing is rewritten. A database in another encoding
-- keeps 0005's body. The backslashes are written in E'' strings, read the same whatever
-- standard_conforming_strings is. Nothing users see changes.
DO $$
BEGIN
    IF current_setting('server_encoding') = 'UTF8' THEN
        CREATE OR REPLACE FUNCTION crawlq_digest(t text) RETURNS bytea
            LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
            AS $body$ SELECT sha256(decode(replace(t, E'\\', E'\\\\'), 'escape')) $body$;
    END IF;
END $$;
