# Settings shared by infra/testbed/up.sh and down.sh (sourced). Every server listens on
# 127.0.0.1 only, on ports away from the services' defaults.
TESTBED_CACHE="${PERFCAST_CACHE:-$HOME/.cache/perfcast}/testbed"
TESTBED_STATE="${TESTBED_CACHE}/run-dir"          # the running testbed's run dir
TESTBED_PG_PORT="${TESTBED_PG_PORT:-15432}"
TESTBED_APP_PORT="${TESTBED_APP_PORT:-18080}"
TESTBED_APP_METRICS_PORT="${TESTBED_APP_METRICS_PORT:-18081}"   # the gunicorn master's /metrics
TESTBED_NODE_PORT="${TESTBED_NODE_PORT:-19100}"
TESTBED_PROCESS_PORT="${TESTBED_PROCESS_PORT:-19156}"
TESTBED_PGEXP_PORT="${TESTBED_PGEXP_PORT:-19187}"
TESTBED_PROM_PORT="${TESTBED_PROM_PORT:-19190}"
TESTBED_LOAD_PORT="${TESTBED_LOAD_PORT:-19199}"   # bench/testbed/load.py's users gauge
TESTBED_PG_BIN="${TESTBED_PG_BIN:-/usr/lib/postgresql/15/bin}"
TESTBED_PYTHON="${TESTBED_PYTHON:-$HOME/.cache/perfcast/venv/bin/python}"
# the servers' CPUs (taskset -c): the database on one, the app on another; on a 2-core host the
# load generator shares them
TESTBED_DB_CPU="${TESTBED_DB_CPU:-1}"
TESTBED_APP_CPU="${TESTBED_APP_CPU:-0}"
# the CPU of the exporters and Prometheus (taskset -c; empty: not pinned). The campaign
# (bench/testbed/campaign.py) puts them, and the load generator, on the app's CPU so that the
# database's CPU runs the database alone
TESTBED_AUX_CPU="${TESTBED_AUX_CPU:-}"
# the servers' scheduling priority: the host is shared with other jobs
TESTBED_NICE="${TESTBED_NICE:-19}"
# TESTBED_RT_PRIO (empty: off): run gunicorn under SCHED_RR at this priority (chrt -r), so that
# the app owns its CPU as on a dedicated server: other jobs on the same CPU, even SCHED_IDLE
# ones, cost a woken worker 1-4 ms per wakeup (a round trip to the database wakes it once),
# 28 ms per request at 30 users (bench/testbed/README.md). PostgreSQL keeps the default
# scheduler: its CPU is kept free of other work (the campaign's foreign-CPU check), and at one
# SCHED_RR priority its backends would run first-come-first-served in 100-ms slices instead of
# sharing the CPU
TESTBED_RT_PRIO="${TESTBED_RT_PRIO:-}"
# the autogroup niceness of the database's session (bench/testbed/autogroup.py; 0: the kernel's
# default): with the kernel's autogroups each session shares a CPU as one peer whatever its
# processes' niceness, so other jobs' nice-19 work took 61-86% of the database's CPU. -20 gives
# the database its CPU back; a no-op, said in up.sh's output, where the kernel has no autogroups
# or refuses the write (lowering a niceness takes CAP_SYS_NICE)
TESTBED_DB_AUTOGROUP_NICE="${TESTBED_DB_AUTOGROUP_NICE:--20}"

# the names of the processes up.sh starts, with their pid files (relative to the run dir)
TESTBED_PROCESSES=(prometheus node_exporter process_exporter postgres_exporter app db_autogroup)

# only signal a pid whose command line still names this run dir (the pid may have been reused)
testbed_owns() {  # pid run_dir
  kill -0 "$1" 2>/dev/null && tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$2"
}
