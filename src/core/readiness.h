/* readiness: what GET /readyz answers. Local modes are ready once listening;
 * remote mode (src/remote) is ready only while it holds an active registration and
 * an open rendezvous connection, and flips this as that changes. */
#ifndef EXEC_CORE_READINESS_H
#define EXEC_CORE_READINESS_H

#include <stdbool.h>

void readiness_set(bool ready);
bool readiness_ok(void);

#endif
