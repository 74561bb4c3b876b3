// typeorm_app.js: the legacy coupon flow with TypeORM 0.3 as its users write it (plain JS, EntitySchema entities,
// one DataSource with its own pool per app instance). Variants:
//   save     repository.findOneBy, stock.remain -= 1, repository.save(stock), then orderRepository.save(order):
//            TypeORM runs each save in its own START TRANSACTION ... COMMIT (its default), re-reading the entity by
//            id inside it (issue 17 row 7)
//   version  the stock entity has a version column (EntitySchema `version: true`, TypeORM's @VersionColumn):
//            findOneBy, repository.update({campaignId, version}, {remain: remain - 1}) (TypeORM adds
//            version = version + 1), 0 rows affected: read again (5 tries); then orderRepository.save(order)
//            (issue 17 row 16)
'use strict';
require('reflect-metadata');
const {DataSource, EntitySchema} = require('typeorm');
const zoo = require('./zoo');

const POOL_SIZE = 10;
const VERSION_TRIES = 5;

function entities(withVersion) {
  const stockColumns = {
    campaignId: {name: 'campaign_id', type: 'bigint', primary: true},
    remain: {type: 'int'},
  };
  if (withVersion) stockColumns.version = {type: 'int', version: true};
  const Stock = new EntitySchema({name: 'Stock', tableName: 'coupon_stock', columns: stockColumns});
  const Order = new EntitySchema({name: 'Order', tableName: 'coupon_order', columns: {
    id: {type: 'bigint', primary: true, generated: 'increment'},
    userId: {name: 'user_id', type: 'bigint'},
    campaignId: {name: 'campaign_id', type: 'bigint'},
    createdAt: {name: 'created_at', type: 'datetime', createDate: true},
  }});
  return {Stock, Order};
}

zoo.run({
  name: 'typeorm',
  async pod(port, args) {
    if (!['save', 'version'].includes(args.variant)) throw new Error('--variant save|version');
    const {Stock, Order} = entities(args.variant === 'version');
    const ds = new DataSource({type: 'mysql', host: args.host, port, username: args.user, password: args.password,
                               database: args.database, entities: [Stock, Order], synchronize: false, logging: false,
                               poolSize: POOL_SIZE});
    await ds.initialize();
    return {ds, stocks: ds.getRepository(Stock), orders: ds.getRepository(Order)};
  },
  async attempt(pod, user, trace, args) {
    const k = args.campaign;
    if (args.variant === 'save') {
      trace.statement = 'SELECT';
      const stock = await pod.stocks.findOneBy({campaignId: k});
      if (!stock || stock.remain <= 0) return 'sold_out_app';
      stock.remain -= 1;
      trace.statement = 'save(stock)';
      await pod.stocks.save(stock);
      trace.statement = 'save(order)';
      await pod.orders.save({userId: user, campaignId: k});
      return 'claimed';
    }
    for (let i = 0; i < VERSION_TRIES; i++) {
      trace.statement = 'SELECT';
      const stock = await pod.stocks.findOneBy({campaignId: k});
      if (!stock || stock.remain <= 0) return 'sold_out_app';
      trace.statement = 'update(stock)';
      const r = await pod.stocks.update({campaignId: k, version: stock.version}, {remain: stock.remain - 1});
      if (r.affected === 1) {
        trace.statement = 'save(order)';
        await pod.orders.save({userId: user, campaignId: k});
        return 'claimed';
      }
    }
    return 'conflicts';   // "please try again"
  },
  async close(pod) {
    await pod.ds.destroy();
  },
});
