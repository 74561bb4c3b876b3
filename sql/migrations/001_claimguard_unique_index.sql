-- claimguard ddl: the UNIQUE indexes that back the claim rules in rules/examples/coupon.yaml.
--
-- Each index lets the database itself refuse a second claim for the same key, whatever
-- the proxy or Redis do; claimguard turns the duplicate-key error (1062) into the rule's
-- "already claimed" answer. Review it, then apply it with your usual schema tooling.
--
-- Before each ALTER TABLE, run the query above it: a UNIQUE index cannot be added while
-- duplicate rows exist (the ALTER fails with error 1062). Merge or delete those rows first.
-- ALGORITHM=INPLACE, LOCK=NONE keeps the table readable and writable while the index is
-- built, and makes the server refuse the statement rather than lock the table.
-- Make the indexed columns NOT NULL: a UNIQUE index never counts rows holding NULL as
-- duplicates of each other.
-- Tables named without a schema are the ones in the current database: run this
-- script after USE <the application's database>.

-- Claim rule 'coupon_order': at most one row in coupon_order per (user_id, campaign_id), the claim's business key.
-- Existing duplicates (this must return no rows before the ALTER TABLE):
--   SELECT `user_id`, `campaign_id`, COUNT(*) AS claims FROM `coupon_order` GROUP BY `user_id`, `campaign_id` HAVING COUNT(*) > 1;
ALTER TABLE `coupon_order` ADD UNIQUE INDEX `uq_claimguard_coupon_order_user_id_campaign_id` (`user_id`, `campaign_id`), ALGORITHM=INPLACE, LOCK=NONE;
