"""Shared test infrastructure: real processes on 127.0.0.1, always cleaned up.

cluster.py   RedisCluster: N masters x R replicas, kill_master_of(key), wait_failover, restart
topology.py  pure: CLUSTER NODES / CLUSTER INFO parsing, slot owner, failover decided
ports.py     free loopback ports (a cluster node needs its port and port+10000)
tls.py       make_pki (CA, server, client, unrelated CA), TLS redis-server, tls_redis_server
proxy.py     TcpProxy: pass / cut / blackhole, switchable at runtime, own thread
ledger.py    committed vs delivered from a jsonl sink: duplicates, lost, recovery time
workload.py  Workload: steady-rate commits through store.RedisStore, burned seqs, its ledger
"""
