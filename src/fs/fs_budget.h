/* fs_budget: one server-wide budget for file content being read into memory for
 * fs/readFile replies (--max-read-buffer-bytes, core/limits.h).
 *
 * Every read takes room for what it holds before holding it, from pool threads at
 * once. Reads start in any number (the pool runs four at a time), and /proc and /sys
 * files say size 0 however much they hold: four reads of /proc/self/pagemap each
 * read up to the 512 MiB per-file limit before failing, 2.5 GiB at once.
 * The rules:
 *   - a file of known size takes room for its whole reply up front; when others hold
 *     too much it holds nothing and waits (FS_BUDGET_WAIT: the fs methods park it on
 *     the loop thread and run it again when room is given back, so no pool thread
 *     blocks); alone, it may take more than the budget (one reply of any size fits,
 *     as the reference returns any file under the per-file limit);
 *   - content past the known size (a file of unknown size, or one that grew) is taken
 *     one read step at a time and never past the budget: a step that does not fit
 *     fails the read (FS_BUDGET_NEVER), unless the read holds nothing yet and others
 *     hold room, then it waits like the above.
 * Room is given back when the reply has been handed to the connection, whose queue
 * counts its bytes from then on (core/inflight.h): the bytes held here are also
 * counted there, and a new read takes room only when both budgets have it, so a
 * read waits while connections hold --max-inflight-bytes of unsent output (and
 * the transport closes the slowest reader meanwhile). Thread-safe. */
#ifndef EXEC_FS_FS_BUDGET_H
#define EXEC_FS_FS_BUDGET_H

#include <stdbool.h>
#include <stddef.h>

enum fs_budget_verdict {
    FS_BUDGET_OK,    /* taken */
    FS_BUDGET_WAIT,  /* not now: the caller holds nothing and others hold room */
    FS_BUDGET_NEVER, /* does not fit and waiting would not help */
};

/* Takes n bytes for a read holding `held` already. alone_ok: the read may exceed
 * the budget when nobody else holds any (a known size's whole reply). */
enum fs_budget_verdict fs_budget_take(size_t n, size_t held, bool alone_ok);
/* Takes n bytes whatever the budget (content that is already in memory). */
void fs_budget_force(size_t n);
/* The server is stopping: a read in progress gives up at its next step (a 400 MB
 * read took 10 s under ASan, and the loop, hence the exit, waits for it). */
void fs_budget_stop(void);
bool fs_budget_stopped(void);
/* Gives n bytes back. */
void fs_budget_give(size_t n);
/* Whether a read needing n bytes and holding nothing would get them now. */
bool fs_budget_fits(size_t n);
/* Bytes taken now (tests, logs). */
size_t fs_budget_used(void);

#endif
