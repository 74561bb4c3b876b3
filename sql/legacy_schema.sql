-- The incident's schema as it ran in production (see the README): coupon_order has no
-- UNIQUE index on (user_id, campaign_id), which is how one user got the same coupon twice.
-- claimguard's fix for that is sql/migrations/001_claimguard_unique_index.sql.

CREATE TABLE coupon_stock (
  campaign_id BIGINT NOT NULL,
  remain      INT    NOT NULL,
  version     INT    NOT NULL DEFAULT 0,
  PRIMARY KEY (campaign_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE coupon_order (
  id          BIGINT   NOT NULL AUTO_INCREMENT,
  user_id     BIGINT   NOT NULL,
  campaign_id BIGINT   NOT NULL,
  created_at  DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
