"""Tests the quick loop (``pytest -m "not slow"``) leaves to the full suite, by node id.

Why a list and not decorators: most are single parameters of a parametrised test (the large
traces of a per-trace check, all but one fixture store of a per-version check), which a
decorator cannot pick. Each took 1 s or more in the quick loop (``pytest -m "not slow"
--durations=0`` at load ~4 on this 2-core machine, 2026-11-26; the quick loop then ran 10 min).
Every module keeps fast tests of what it covers (a smaller trace, the oldest store, the cheapest
case of a guarantee); CI runs the whole suite, these included.

An entry is a node id: ``path::test`` marks every parameter of the test, ``path::test[id]``
one. ``tests/conftest.py`` adds the ``slow`` marker to each, and fails the run when an entry
of a collected module names no test (a renamed test must leave the list too).
"""

from __future__ import annotations

HEAVY: tuple[str, ...] = (
    # corpus: whole-trace Kineto mutations and a symlink loop walk (the text-log mutations stay)
    "tests/corpus/test_corpus.py::test_kineto_byte_flips_and_compression",
    "tests/corpus/test_corpus.py::test_kineto_numeric_edge_values",
    "tests/corpus/test_corpus.py::test_kineto_truncated_at_structural_points",
    "tests/corpus/test_corpus.py::test_symlink_loops_do_not_hang",
    # oracle: every test of eleven of the twelve traces (a per-trace derive of 2-6 s); the
    # hta_rank_unavailable trace keeps the three reference checks in the quick loop
    *(
        f"tests/oracle/test_kineto_oracle.py::{test}[{trace}]"
        for test in (
            "test_iterations_match_reference",
            "test_call_bandwidth_matches_reference",
            "test_rank_matches_reference",
        )
        for trace in (
            "deepseek_profile-data__train",
            "hta_distributed_info_unavailable__distributed_info_not_found",
            "hta_nccl_parser_config__nccl_data",
            "hta_negative_queue_length__rank0",
            "hta_ns_resolution_trace__rank-0",
            "hta_trace_filter__sampled_rank-0",
            "hta_trace_filter__sampled_rank-1",
            "kineto_tb_plugin_2021__resnet50_worker0",
            "sample_traces__ds_pipe_pp2_dp2_cpu",
            "tracelens_b200__eager_trace",
            "tracelens_mi300__resnet_act_checkpoint",
        )
    ),
    # parsers
    "tests/parsers/test_bad_values.py::test_ingest_kineto_all_events_bad_is_an_error",
    "tests/parsers/test_bad_values.py::test_ingest_says_what_it_rejected_and_fails_on_nothing_usable",
    # a whole-trace ingest per bad value: NaN and a negative duration stay
    *(
        "tests/parsers/test_bad_values.py::test_kineto_bad_time_rejects_that_event[" + p + "]"
        for p in (
            "ts-Infinity-out of range",
            "dur--Infinity-out of range",
            "ts-1e400-out of range",
            "ts-1e300-out of range",
            "dur-1e300-out of range",
            "ts--1e18-out of range",
            "ts-18446744073709551616-out of range",
        )
    ),
    "tests/parsers/test_bad_values.py::test_kineto_oversized_string_in_an_event_rejects_that_event",
    "tests/parsers/test_bounds.py::test_decompression_bomb_bounded_per_read[bz2]",
    "tests/parsers/test_bounds.py::test_decompression_bomb_bounded_per_read[xz]",
    "tests/parsers/test_bounds.py::test_decompression_bomb_bounded_per_read[zstd]",
    "tests/parsers/test_bounds.py::test_gzip_high_ratio_read_in_bounded_memory",
    "tests/parsers/test_bounds.py::test_nccl_64mib_line_rejected_in_bounded_memory",
    "tests/parsers/test_flight_recorder.py::test_ingest_reports_the_refused_pickle",
    "tests/parsers/test_kineto.py::test_ds_pipe_gloo_traces",
    "tests/parsers/test_kineto.py::test_sample_rows_match_independent_counts[hta_negative_queue_length__rank0.json.gz]",
    "tests/parsers/test_kineto.py::test_sample_rows_match_independent_counts[kineto_tb_plugin_2021__resnet50_worker0.pt.trace.json.gz]",
    "tests/parsers/test_kineto.py::test_sample_rows_match_independent_counts[tracelens_mi300__resnet_act_checkpoint.json.gz]",
    "tests/parsers/test_kineto.py::test_synthetic_memory_stays_bounded",
    "tests/parsers/test_kineto_timing.py::test_every_call_is_timed_by_the_kernels_its_launch_chain_reaches[hta_negative_queue_length__rank0.json.gz]",
    "tests/parsers/test_kineto_timing.py::test_kernels_get_launch_time_and_launch_step",
    "tests/parsers/test_kineto_timing.py::test_negative_queue_all_reduce_is_timed_by_its_nccl_kernel",
    "tests/parsers/test_kineto_timing.py::test_old_trace_gather_scatter_group_from_c10d_shapes[hta_negative_queue_length__rank0.json.gz-ops0]",
    "tests/parsers/test_kineto_timing.py::test_zero_size_call_that_launched_nothing_has_no_duration",
    "tests/parsers/test_nccl_incarnations.py::test_one_process_with_ten_thousand_incarnations",
    "tests/parsers/test_nccl_incarnations.py::test_scale_every_row_on_its_incarnation",
    "tests/parsers/test_nccl_kernels.py::test_real_kernel_names_vectorised_matches_scalar",
    # pipeline: each guarantee keeps its cheapest test here
    "tests/pipeline/test_catalog_incremental.py::test_a_broken_sql_module_is_skipped_and_the_rest_is_built",
    "tests/pipeline/test_catalog_incremental.py::test_a_catalog_without_the_record_is_rebuilt",
    "tests/pipeline/test_catalog_incremental.py::test_a_reader_on_the_catalog_leaves_it_to_the_rebuild",
    "tests/pipeline/test_catalog_incremental.py::test_derive_extends_the_catalog_as_a_rebuild_would",
    "tests/pipeline/test_catalog_open.py::test_query_on_an_intermediate_view_gives_derives_rows",
    "tests/pipeline/test_cli.py::test_bad_inputs_give_one_line_each_and_no_traceback",
    "tests/pipeline/test_cli.py::test_missing_path_and_unrecognised_file_exit_nonzero",
    "tests/pipeline/test_config_validation.py::test_a_config_without_a_model_is_said_to_give_no_predictions",
    "tests/pipeline/test_config_validation.py::test_derive_and_report_on_a_store_with_an_invalid_stored_config",
    # derive and report each keep one unknown-key case (a command run of ~1 s each)
    *(
        "tests/pipeline/test_config_validation.py::"
        f"test_every_command_refuses_an_unknown_section_or_key_naming_file_and_key[{cmd}-{case}]"
        for cmd, cases in (
            (
                "derive",
                ("model_key", "generate_key", "generate_type", "scenario_key", "scenario_rank"),
            ),
            (
                "report",
                ("section", "generate_key", "generate_type", "scenario_key", "scenario_rank"),
            ),
        )
        for case in cases
    ),
    "tests/pipeline/test_collect.py::test_cli_collect_returns_the_command_exit_code",
    "tests/pipeline/test_derive_atomic.py::test_concurrent_derives_publish_one_complete_set",
    "tests/pipeline/test_derive_atomic.py::test_derive_records_its_snapshot",
    "tests/pipeline/test_derive_atomic.py::test_failed_derive_keeps_previous_set_and_leaves_no_files",
    "tests/pipeline/test_derive_atomic.py::test_killed_derive_leaves_previous_set_visible",
    "tests/pipeline/test_derive_atomic.py::test_publish_on_a_full_disk_leaves_nothing",
    "tests/pipeline/test_derive_atomic.py::test_report_to_a_folder_is_refused_without_temp_file",
    "tests/pipeline/test_derive_atomic.py::test_serve_redoes_what_an_interrupted_cycle_left",
    "tests/pipeline/test_derive_atomic.py::test_store_in_pre_generation_layout_stays_readable",
    "tests/pipeline/test_disk_full.py::test_derive_disk_full_is_clear_and_leaves_nothing",
    "tests/pipeline/test_disk_full.py::test_disk_full_leaves_store_unchanged",
    "tests/pipeline/test_disk_full.py::test_read_only_store_derive_is_clear_and_report_reads",
    "tests/pipeline/test_disk_full.py::test_report_disk_full_catalog_is_clear_without_orphans",
    "tests/pipeline/test_disk_full.py::test_report_output_disk_full_leaves_no_temp_file",
    "tests/pipeline/test_exactly_once.py::test_commit_log_work_per_file_does_not_grow_with_the_run",
    "tests/pipeline/test_exactly_once.py::test_rotated_copy_of_an_ingested_log_adds_nothing[rotated]",
    "tests/pipeline/test_exactly_once.py::test_serve_task_holds_back_a_cut_last_line",
    "tests/pipeline/test_exactly_once.py::test_truncated_replaced_and_deleted_files_policy",
    "tests/pipeline/test_hang.py::test_hang_command_on_an_ingested_run_and_on_files",
    "tests/pipeline/test_hang_marts.py::test_marts_agree_on_dumps_without_pg_status",
    "tests/pipeline/test_hang_marts.py::test_marts_agree_with_hang_on_the_nvrx_fault_injections",
    "tests/pipeline/test_hang_marts.py::test_marts_agree_with_hang_on_the_recorded_gpu_hang",
    "tests/pipeline/test_hang_marts.py::test_nccl_logs_cut_where_rank_2_stops_posting",
    "tests/pipeline/test_query_security.py::test_catalog_rebuild_reads_only_the_store_data",
    "tests/pipeline/test_query_security.py::test_explain_of_a_writing_statement_writes_nothing",
    "tests/pipeline/test_query_security.py::test_hostile_folder_names_are_skipped_not_run",
    "tests/pipeline/test_query_security.py::test_legitimate_reads_still_run",
    "tests/pipeline/test_query_security.py::test_plain_query_during_a_write_session_is_refused_and_nothing_is_lost",
    "tests/pipeline/test_query_security.py::test_query_has_derives_memory_limit_and_a_private_spill_folder",
    "tests/pipeline/test_query_security.py::test_query_on_a_store_it_cannot_write_uses_the_catalog_there_is",
    "tests/pipeline/test_query_security.py::test_query_on_an_intermediate_view_is_confined_too",
    "tests/pipeline/test_read_only_store.py::test_read_only_mount_at_another_path",
    "tests/pipeline/test_read_only_store.py::test_readers_work_and_writers_say_read_only_without_root",
    # the oldest fixture store stays in the quick loop
    *(
        f"tests/pipeline/test_schema_evolution.py::test_old_store_opens_reads_grows_and_derives[store_v1.{v}.0]"
        for v in range(1, 7)
    ),
    "tests/pipeline/test_security.py::test_query_is_read_only_by_default",
    "tests/pipeline/test_security.py::test_query_write_creates_tables_and_files",
    "tests/pipeline/test_store.py::test_catalog_follows_a_moved_store",
    "tests/pipeline/test_store.py::test_concurrent_ingests_commit_once",
    "tests/pipeline/test_store.py::test_ingest_then_reingest_adds_nothing",
    "tests/pipeline/test_store.py::test_uncommitted_files_are_invisible",
    "tests/pipeline/test_store.py::test_views_have_comments_and_catalog_is_readonly",
    "tests/pipeline/test_symlinks.py::test_a_named_symlink_is_still_read",
    "tests/pipeline/test_terminal.py::test_query_output_is_sanitised",
    # reports, sql, synthetic
    # the notebook example (ingest, derive, charts, report: 15 s); the import check stays
    "tests/test_api.py::test_readme_example_runs",
    "tests/test_api.py::test_frames_agree_with_the_parquet_read_with_the_commit_filter",
    "tests/test_api.py::test_names_are_checked",
    "tests/reports/test_stragglers.py::test_large_world_heatmap_and_page_stay_bounded",
    "tests/sql/test_invariants_time.py::test_sequence_detection_finds_deepspeed_steps",
    "tests/sql/test_invariants_traffic.py::test_cori_replayed_allreduce_flows_along_the_rings",
    "tests/sql/test_invariants_traffic.py::test_deepspeed_summary_busbw_corrected_to_group_size",
    "tests/synthetic/test_synth_cli.py::test_same_seed_gives_identical_bytes",
    # the 32-rank four-format run of the module fixture (8 s) and its readers; the hang dumps stay
    "tests/synthetic/test_synth_inspector_fr.py::test_inspector_has_every_call_with_its_size_on_its_process",
    "tests/synthetic/test_synth_inspector_fr.py::test_inspector_sequences_and_exec_times_equal_the_calls",
    "tests/synthetic/test_synth_inspector_fr.py::test_inspector_header_id_is_the_nccl_commid_cut",
    "tests/synthetic/test_synth_inspector_fr.py::test_flight_recorder_keeps_the_last_n_entries_of_every_rank",
    "tests/synthetic/test_synth_inspector_fr.py::test_flight_recorder_full_ring_equals_every_call",
    "tests/synthetic/test_synth_inspector_fr.py::test_inspector_2_28_shape_keeps_the_latest_collective_per_dump_tick",
    "tests/synthetic/test_synth_inspector_fr.py::test_moe_all_to_all_in_inspector_and_flight_recorder",
    "tests/synthetic/test_synth_roundtrip.py::test_ingest_gives_back_the_models_calls_and_sizes_in_every_format",
    "tests/synthetic/test_synth_roundtrip.py::test_ingest_of_a_faulty_run",
)
