/* Unit tests for the per-process event log: one seq counter for output, exit and
 * close; retained window limits by bytes and chunk count; cursor lookups. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "process/event_log.h"

static void test_seq_shared_by_output_and_events(void **state)
{
    struct event_log log;
    event_log_init(&log);
    struct log_chunk *a = event_log_append(&log, STREAM_STDOUT, "hi\n", 3);
    uint64_t exit_seq = event_log_take_seq(&log);
    struct log_chunk *b = event_log_append(&log, STREAM_STDERR, "oops\n", 5);
    uint64_t close_seq = event_log_take_seq(&log);
    assert_int_equal(a->seq, 1);
    assert_int_equal(exit_seq, 2);
    assert_int_equal(b->seq, 3);
    assert_int_equal(close_seq, 4);
    assert_int_equal(log.next_seq, 5);
    /* Reads skip the non-output seqs. */
    assert_ptr_equal(event_log_after(&log, 0), a);
    assert_ptr_equal(event_log_after(&log, 1), b);
    assert_ptr_equal(event_log_after(&log, 2), b);
    assert_null(event_log_after(&log, 3));
    assert_null(event_log_after(&log, 100));
    assert_memory_equal(b->data, "oops\n", 5);
    assert_string_equal(event_log_stream_name(STREAM_STDERR), "stderr");
    event_log_free(&log);
}

static void test_byte_window_evicts_whole_oldest_chunks(void **state)
{
    struct event_log log;
    event_log_init(&log);
    static uint8_t block[8192];
    memset(block, 'x', sizeof block);
    size_t total = 3u << 20; /* 3 MiB of 8 KiB chunks */
    for (size_t i = 0; i < total / sizeof block; i++)
        event_log_append(&log, STREAM_STDOUT, block, sizeof block);
    assert_true(log.bytes <= EVENT_LOG_MAX_BYTES);
    assert_true(log.bytes > EVENT_LOG_MAX_BYTES - sizeof block);
    assert_int_equal(log.count, EVENT_LOG_MAX_BYTES / sizeof block);
    /* The oldest retained chunk is where a stale cursor resumes, with a gap. */
    struct log_chunk *first = event_log_after(&log, 0);
    assert_int_equal(first->seq, total / sizeof block - log.count + 1);
    assert_ptr_equal(log.tail->next, NULL);
    event_log_free(&log);
    assert_int_equal(log.bytes, 0);
}

static void test_chunk_count_limit(void **state)
{
    struct event_log log;
    event_log_init(&log);
    for (unsigned i = 0; i < EVENT_LOG_MAX_CHUNKS + 10; i++)
        event_log_append(&log, STREAM_PTY, "a", 1);
    assert_int_equal(log.count, EVENT_LOG_MAX_CHUNKS);
    assert_int_equal(log.head->seq, 11);
    event_log_free(&log);
}

static void test_oversized_chunk_is_kept(void **state)
{
    /* A single chunk is never evicted by its own arrival, whatever its size. */
    struct event_log log;
    event_log_init(&log);
    event_log_append(&log, STREAM_STDOUT, "a", 1);
    static uint8_t big[EVENT_LOG_MAX_BYTES + 1];
    struct log_chunk *c = event_log_append(&log, STREAM_STDOUT, big, sizeof big);
    assert_ptr_equal(log.head, c);
    assert_int_equal(log.count, 1);
    event_log_free(&log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seq_shared_by_output_and_events),
        cmocka_unit_test(test_byte_window_evicts_whole_oldest_chunks),
        cmocka_unit_test(test_chunk_count_limit),
        cmocka_unit_test(test_oversized_chunk_is_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
