// mariadb_batch_app.js: the legacy coupon flow over the MariaDB Node connector 3.x (`mariadb`), createPool, as
// its users write it. Variants:
//   batch       pool.query the stock, pool.query UPDATE ... SET remain = <read - 1>, then the claim row with
//               pool.batch(INSERT ..., [[user, campaign]]): MariaDB's COM_STMT_BULK_EXECUTE (issue 17 row 5)
//   batch_tx    the same on one connection in beginTransaction() ... commit(), rollback() on an error
//   call_execute  conn.execute('CALL claim_coupon(?, ?)'): the claim in a stored procedure, as a server-side
//               prepared statement (binary protocol) (issue 17 row 1, prepared)
'use strict';
const mariadb = require('mariadb');
const zoo = require('./zoo');

const POOL_SIZE = 6;
const ER_DUP_ENTRY = 1062;
const INSERT = 'INSERT INTO coupon_order (user_id, campaign_id, created_at) VALUES (?, ?, NOW())';

zoo.run({
  name: 'mariadb_batch',
  async pod(port, args) {
    if (!['batch', 'batch_tx', 'call_execute'].includes(args.variant)) {
      throw new Error('--variant batch|batch_tx|call_execute');
    }
    return mariadb.createPool({host: args.host, port, user: args.user, password: args.password,
                               database: args.database, connectionLimit: POOL_SIZE, acquireTimeout: 60000});
  },
  async attempt(pool, user, trace, args) {
    const k = args.campaign;
    if (args.variant === 'call_execute') {
      const conn = await pool.getConnection();
      try {
        trace.statement = 'CALL (execute)';
        const res = await conn.execute('CALL claim_coupon(?, ?)', [user, k]);
        return res[0][0].claimed === 1 ? 'claimed' : 'sold_out_app';
      } catch (e) {
        if (e.errno === ER_DUP_ENTRY) return 'conflicts';
        throw e;
      } finally {
        conn.release();
      }
    }
    if (args.variant === 'batch') {
      trace.statement = 'SELECT';
      const rows = await pool.query('SELECT remain FROM coupon_stock WHERE campaign_id = ?', [k]);
      const remain = rows[0].remain;
      if (remain <= 0) return 'sold_out_app';
      trace.statement = 'UPDATE';
      await pool.query(`UPDATE coupon_stock SET remain = ${remain - 1} WHERE campaign_id = ?`, [k]);
      trace.statement = 'INSERT (batch)';
      await pool.batch(INSERT, [[user, k]]);
      return 'claimed';
    }
    const conn = await pool.getConnection();
    try {
      await conn.beginTransaction();
      trace.statement = 'SELECT';
      const rows = await conn.query('SELECT remain FROM coupon_stock WHERE campaign_id = ?', [k]);
      const remain = rows[0].remain;
      if (remain <= 0) {
        await conn.rollback();
        return 'sold_out_app';
      }
      trace.statement = 'UPDATE';
      await conn.query(`UPDATE coupon_stock SET remain = ${remain - 1} WHERE campaign_id = ?`, [k]);
      trace.statement = 'INSERT (batch)';
      await conn.batch(INSERT, [[user, k]]);
      trace.statement = 'COMMIT';
      await conn.commit();
      return 'claimed';
    } catch (e) {
      try {
        await conn.rollback();
      } catch (ignored) {
        // the connection is gone
      }
      throw e;
    } finally {
      conn.release();
    }
  },
  async close(pool) {
    await pool.end();
  },
});
