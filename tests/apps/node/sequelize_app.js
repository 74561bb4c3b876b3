// sequelize_app.js: the legacy coupon flow with Sequelize 6 models over mysql2, as its users write it:
// Stock.findOne, stock.remain -= 1, stock.save(), Order.create(); variant `transaction` wraps it in
// sequelize.transaction(); `upsert` writes the stock with Stock.upsert({campaignId, remain: remain - 1})
// (INSERT ... ON DUPLICATE KEY UPDATE, issue 17 row 3); `version` gives the model `version: true` (optimistic
// locking: UPDATE ... AND version = ?, OptimisticLockError on 0 rows, read again, 5 tries; issue 17 row 16).
// One Sequelize instance (its own pool) per app instance.
'use strict';
const {Sequelize, DataTypes, OptimisticLockError} = require('sequelize');
const zoo = require('./zoo');

const VARIANTS = ['save', 'transaction', 'upsert', 'version'];
const VERSION_TRIES = 5;

function models(sequelize, version) {
  const Stock = sequelize.define('Stock', {
    campaignId: {type: DataTypes.BIGINT, primaryKey: true, field: 'campaign_id'},
    remain: {type: DataTypes.INTEGER, allowNull: false},
  }, {tableName: 'coupon_stock', timestamps: false, version});
  const Order = sequelize.define('Order', {
    id: {type: DataTypes.BIGINT, primaryKey: true, autoIncrement: true},
    userId: {type: DataTypes.BIGINT, allowNull: false, field: 'user_id'},
    campaignId: {type: DataTypes.BIGINT, allowNull: false, field: 'campaign_id'},
  }, {tableName: 'coupon_order', timestamps: true, createdAt: 'created_at', updatedAt: false});
  return {Stock, Order};
}

async function claim({Stock, Order}, user, trace, campaign, transaction) {
  trace.statement = 'SELECT';
  const stock = await Stock.findOne({where: {campaignId: campaign}, transaction});
  if (!stock || stock.remain <= 0) return 'sold_out_app';
  stock.remain -= 1;
  trace.statement = 'UPDATE';
  await stock.save({transaction});
  trace.statement = 'INSERT';
  await Order.create({userId: user, campaignId: campaign}, {transaction});
  return 'claimed';
}

async function upsert({Stock, Order}, user, trace, campaign) {
  trace.statement = 'SELECT';
  const stock = await Stock.findOne({where: {campaignId: campaign}});
  if (!stock || stock.remain <= 0) return 'sold_out_app';
  trace.statement = 'UPSERT';
  await Stock.upsert({campaignId: campaign, remain: stock.remain - 1});
  trace.statement = 'INSERT';
  await Order.create({userId: user, campaignId: campaign});
  return 'claimed';
}

async function versioned({Stock, Order}, user, trace, campaign) {
  for (let i = 0; i < VERSION_TRIES; i++) {
    trace.statement = 'SELECT';
    const stock = await Stock.findOne({where: {campaignId: campaign}});
    if (!stock || stock.remain <= 0) return 'sold_out_app';
    stock.remain -= 1;
    trace.statement = 'UPDATE';
    try {
      await stock.save();
    } catch (e) {
      if (e instanceof OptimisticLockError) continue;
      throw e;
    }
    trace.statement = 'INSERT';
    await Order.create({userId: user, campaignId: campaign});
    return 'claimed';
  }
  return 'conflicts';   // "please try again"
}

zoo.run({
  name: 'sequelize',
  async pod(port, args) {
    if (!VARIANTS.includes(args.variant)) throw new Error(`--variant ${VARIANTS.join('|')}`);
    const sequelize = new Sequelize(args.database, args.user, args.password,
                                    {host: args.host, port, dialect: 'mysql', logging: false});
    return {sequelize, models: models(sequelize, args.variant === 'version')};
  },
  async attempt(pod, user, trace, args) {
    if (args.variant === 'upsert') return upsert(pod.models, user, trace, args.campaign);
    if (args.variant === 'version') return versioned(pod.models, user, trace, args.campaign);
    if (args.variant === 'transaction') {
      return pod.sequelize.transaction((t) => claim(pod.models, user, trace, args.campaign, t));
    }
    return claim(pod.models, user, trace, args.campaign, undefined);
  },
  async close(pod) {
    await pod.sequelize.close();
  },
});
