#!/bin/bash
# Branch stack-host (notes/probes/stack-host.patch: a host buffer on the
# caller's stack classified without the CUDA driver's pointer query)
# against main, measured as heap-call.sh measures heap-host: its heap,
# cold-start and remote tests, then bench-nodes (whose 8 B latency buffer
# is on the stack) with both memory kinds in one process and host only,
# main (m) and the branch (h) in turns (~2 min).  Log: $OUT/log.txt.
#   bash notes/probes/stack-call.sh
PATCH=stack-host exec bash "$(dirname "$0")/heap-call.sh"
