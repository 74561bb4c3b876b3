// sequelize_app.js: the legacy coupon flow with Sequelize 6 models over mysql2, as its users write it:
// Stock.findOne, stock.remain -= 1, stock.save(), Order.create(); variant `transaction` wraps it in
// sequelize.transaction(). One Sequelize instance (its own pool) per app instance.
'use strict';
const {Sequelize, DataTypes} = require('sequelize');
const zoo = require('./zoo');

function models(sequelize) {
  const Stock = sequelize.define('Stock', {
    campaignId: {type: DataTypes.BIGINT, primaryKey: true, field: 'campaign_id'},
    remain: {type: DataTypes.INTEGER, allowNull: false},
  }, {tableName: 'coupon_stock', timestamps: false});
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

zoo.run({
  name: 'sequelize',
  async pod(port, args) {
    if (!['save', 'transaction'].includes(args.variant)) throw new Error('--variant save|transaction');
    const sequelize = new Sequelize(args.database, args.user, args.password,
                                    {host: args.host, port, dialect: 'mysql', logging: false});
    return {sequelize, models: models(sequelize)};
  },
  async attempt(pod, user, trace, args) {
    if (args.variant === 'transaction') {
      return pod.sequelize.transaction((t) => claim(pod.models, user, trace, args.campaign, t));
    }
    return claim(pod.models, user, trace, args.campaign, undefined);
  },
  async close(pod) {
    await pod.sequelize.close();
  },
});
