// Mocha root hook for tests/node/run-node-redis-streams.sh. node-redis's
// test-utils start a Redis Cluster in docker for the `cluster.*` half of each
// spec (spawnRedisCluster, packages/test-utils/lib/dockers.ts) and have no
// option to use one already running; this swaps that function for one that
// returns the shardstream nodes of SHARDSTREAM_CLUSTER_PORTS. spawnRedisServer
// (the `client.*` half, filtered out by --grep but whose before hooks still
// run) gets SHARDSTREAM_PORT, so nothing calls docker. All else (cluster
// client, FLUSHALL on each master, version gates) is node-redis's own.
// Patched in a root beforeAll: after the specs loaded test-utils (it needs
// mocha's globals), before any suite's before hook asks for a server.
const server = Number(process.env.SHARDSTREAM_PORT);
const cluster = (process.env.SHARDSTREAM_CLUSTER_PORTS || '').split(',').filter(Boolean).map(Number);
if (!server || cluster.length === 0) throw new Error('set SHARDSTREAM_PORT and SHARDSTREAM_CLUSTER_PORTS');

exports.mochaHooks = {
  beforeAll() {
    const dockers = require(require.resolve('@redis/test-utils/dist/lib/dockers', { paths: [process.cwd()] }));
    dockers.spawnRedisServer = async () => ({ port: server, dockerId: '' });
    dockers.spawnRedisCluster = async () => cluster.map(port => ({ port, dockerId: '' }));
  }
};
