/* env_vars: the variables' one copy (env_vars.h says who fills it and why). */
#include "core/env_vars.h"

struct env_vars env_vars;
