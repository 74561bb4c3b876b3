-- Demo data for sql/legacy_schema.sql: the flash sale of the incident, one campaign with 1000 coupons.
INSERT INTO coupon_stock (campaign_id, remain, version) VALUES (1, 1000, 0);
