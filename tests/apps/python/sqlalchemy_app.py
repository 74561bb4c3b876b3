#!/usr/bin/env python3
"""sqlalchemy_app.py: the legacy coupon flow with the SQLAlchemy 1.4 ORM over mysqlclient, default QueuePool.

Variants: read_then_tx (the stock is read in a read-only session that gives its connection back, then a
write transaction sets remain = <read - 1> and adds the order: Spring's readOnly-then-write), session
(one ORM session: get, stock.remain -= 1, add(Order), commit), version (the same with the mapper's
version_id_col: UPDATE ... SET remain = ?, version = ? WHERE campaign_id = ? AND version = ?; StaleDataError:
read again, 5 tries; a duplicate key (IntegrityError) is the app's own "already claimed"; issue 17 row 17).
One engine (pool) per app instance.
"""

import os
import sys

from sqlalchemy import BigInteger, Column, DateTime, Integer, create_engine, func, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, declarative_base
from sqlalchemy.orm.exc import StaleDataError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402

Base = declarative_base()


class Stock(Base):
    __tablename__ = "coupon_stock"
    campaign_id = Column(BigInteger, primary_key=True, autoincrement=False)
    remain = Column(Integer, nullable=False)


VersionedBase = declarative_base()   # its own metadata: coupon_stock mapped with the version column


class VersionedStock(VersionedBase):
    __tablename__ = "coupon_stock"
    campaign_id = Column(BigInteger, primary_key=True, autoincrement=False)
    remain = Column(Integer, nullable=False)
    version = Column(Integer, nullable=False)
    __mapper_args__ = {"version_id_col": version}


VERSION_TRIES = 5
ER_DUP_ENTRY = 1062


class Order(Base):
    __tablename__ = "coupon_order"
    id = Column(BigInteger, primary_key=True)
    user_id = Column(BigInteger, nullable=False)
    campaign_id = Column(BigInteger, nullable=False)
    created_at = Column(DateTime, nullable=False, server_default=func.now())


class SqlAlchemyApp(zoo.App):
    name = "sqlalchemy"

    def __init__(self, args):
        super().__init__(args)
        if args.variant not in ("read_then_tx", "session", "version"):
            raise SystemExit("sqlalchemy_app.py: --variant read_then_tx|session|version")

    def pod(self, port):
        a = self.args
        return create_engine(f"mysql+mysqldb://{a.user}:{a.password}@{a.host}:{port}/{a.database}", future=True)

    def close_pod(self, engine):
        engine.dispose()

    def attempt(self, engine, user, trace):
        k = self.args.campaign
        if self.args.variant == "read_then_tx":
            trace.statement = "SELECT"
            with Session(engine) as s:   # the read-only service method
                remain = s.get(Stock, k).remain
            if remain <= 0:
                return zoo.Outcome.SOLD_OUT
            with Session(engine) as s, s.begin():   # the write service method
                trace.statement = "UPDATE"
                s.execute(update(Stock).where(Stock.campaign_id == k).values(remain=remain - 1))
                trace.statement = "INSERT"
                s.add(Order(user_id=user, campaign_id=k))
                s.flush()
                trace.statement = "COMMIT"
            return zoo.Outcome.CLAIMED
        if self.args.variant == "version":
            return self.versioned(engine, user, trace)
        with Session(engine) as s:
            trace.statement = "SELECT"
            stock = s.get(Stock, k)
            if stock.remain <= 0:
                return zoo.Outcome.SOLD_OUT
            stock.remain -= 1
            s.add(Order(user_id=user, campaign_id=k))
            trace.statement = "COMMIT"   # the unit of work flushes the UPDATE and the INSERT here
            s.commit()
        return zoo.Outcome.CLAIMED

    def versioned(self, engine, user, trace):
        k = self.args.campaign
        for _ in range(VERSION_TRIES):
            with Session(engine) as s:
                trace.statement = "SELECT"
                stock = s.get(VersionedStock, k)
                if stock.remain <= 0:
                    return zoo.Outcome.SOLD_OUT
                stock.remain -= 1
                s.add(Order(user_id=user, campaign_id=k))
                trace.statement = "COMMIT"
                try:
                    s.commit()
                except StaleDataError:
                    s.rollback()
                    continue
                except IntegrityError as e:
                    s.rollback()
                    if zoo.sql_error(e) and zoo.sql_error(e)[0] == ER_DUP_ENTRY:
                        return zoo.Outcome.CONFLICT
                    raise
            return zoo.Outcome.CLAIMED
        return zoo.Outcome.CONFLICT   # "please try again"


if __name__ == "__main__":
    sys.exit(zoo.main(SqlAlchemyApp))
