#!/usr/bin/env bash
# Regenerates tests/unit/noise_ik_vectors.h (the committed Noise hybrid-IK vectors the
# unit test checks offline) from the independent JavaScript model. Run it only when
# the model or the vector definition changes; the output is deterministic.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
nm=$("$here/install.sh")
node "$here/noise_ik_oracle.mjs" "$nm" header > "$here/../unit/noise_ik_vectors.h.tmp"
mv "$here/../unit/noise_ik_vectors.h.tmp" "$here/../unit/noise_ik_vectors.h"
echo "wrote tests/unit/noise_ik_vectors.h"
