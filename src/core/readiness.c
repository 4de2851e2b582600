/* readiness: the /readyz state (see readiness.h). One flag on the loop thread. */
#include "core/readiness.h"

static bool not_ready; /* zero-initialised: ready unless remote mode says otherwise */

void readiness_set(bool ready)
{
    not_ready = !ready;
}

bool readiness_ok(void)
{
    return !not_ready;
}
