# End-to-end tests of ringgrad-train (tools/ringgrad-train.c) across ranks; label "train", and
# "mpi" for those on several ranks. All run on a small Fashion-MNIST folder (make_data.py: 960
# training and 100 test images, made once by the fixture test train/data), so that an epoch and
# its evaluation take well under a second:
#   equiv.sh    N ranks at batch 48/N reach 1 rank's weights at batch 48 (the proof of DDP)
#   fail.sh     a killed rank, a model or option mismatch, missing data, bad flags: quick errors
#   timeline.sh --timeline: valid JSON, every step's events, one allreduce per bucket, overlap
#   resume.sh   --save mid-epoch and --resume under MPI continue bit for bit
#   cluster.sh  2 simulated hosts (label "cluster"; skipped where namespaces are not allowed)
set(RG_TRAIN_OUT ${CMAKE_BINARY_DIR}/tests/train)
set(RG_TRAIN_ENV ${RG_MPI_TEST_ENV} "RG_TRAIN=$<TARGET_FILE:ringgrad-train>" "RG_MPIRUN=${RG_MPIRUN}"
    "RG_TRAIN_DATA=${RG_TRAIN_OUT}/data" "RG_TRAIN_OUT=${RG_TRAIN_OUT}")
set(RG_TRAIN_SH ${CMAKE_CURRENT_LIST_DIR})

add_test(NAME train/data COMMAND python3 ${RG_TRAIN_SH}/make_data.py ${RG_TRAIN_OUT}/data)
set_tests_properties(train/data PROPERTIES LABELS train FIXTURES_SETUP rg_train_data TIMEOUT 60)

# rg_train_test(NAME NP FIXTURES LABELS COMMAND...): a test of tests/train on NP ranks that
# needs the data and the given fixtures.
function(rg_train_test name np fixtures labels)
  add_test(NAME train/${name} COMMAND ${ARGN})
  set_tests_properties(train/${name} PROPERTIES LABELS "${labels}" TIMEOUT 300 PROCESSORS ${np}
                       ENVIRONMENT "${RG_TRAIN_ENV}" FIXTURES_REQUIRED "rg_train_data;${fixtures}")
endfunction()

# ---- N-rank equivalence. Tolerances (largest |a - b| over every weight and optimizer state
# element after the steps; the measured differences are 8-30x below them):
#   Adam 1e-4: Adam divides each update by the running RMS of its gradient, so a gradient that is
#     almost 0 turns rounding differences into a visible part of an update (measured: up to 5e-6
#     after 12 steps); 1e-4 is 10% of one step of lr 1e-3. A control run with lr x 1.01 must
#     differ by more (it does by 9e-3).
#   SGD 1e-6 (MLP): the update is linear in the gradient, so differences stay at rounding level
#     (measured: 3e-8 to 5e-8, weights of size ~0.05). A control with lr x 1.01 must differ.
#   SGD 1e-4 (CNN): ReLU and max-pool make yes/no decisions; where two pooled values (or a ReLU
#     input and 0) are within rounding of each other, the other summation order can flip one and
#     send one image's share of a gradient (|g| / 48) to another element. The normal build
#     measured 4e-8, the sanitizer build (other rounding) 1.2e-5 in momentum buffers of ~0.005;
#     a control with lr x 1.01 differs by up to 4.5e-3 (52k elements over 1e-4), and so would a
#     gradient off by any factor or taken from other images.
set(RG_EQUIV_mlp_adam --model mlp --max-steps 12)
set(RG_EQUIV_mlp_sgd --model mlp --optim sgd --lr 0.05 --momentum 0.9 --max-steps 12)
set(RG_EQUIV_cnn_sgd --model cnn --optim sgd --lr 0.05 --momentum 0.9 --max-steps 4)
# augmentation: each image's random crop and flip depend on (seed, epoch, image) only
set(RG_EQUIV_cnn_sgd_aug ${RG_EQUIV_cnn_sgd} --augment flip-crop --workers 2)
# plain SGD (no momentum): ps-async applies each worker's 1/W share as its own step, which equals
# one step on the average only for an optimizer without state
set(RG_EQUIV_mlp_sgd0 --model mlp --optim sgd --lr 0.05 --max-steps 12)

# SyncBatchNorm: batch statistics over every rank's batch, so N ranks at B/N equal 1 rank at B
# also with BatchNorm. One step, so that the momentum buffers hold the step's gradient; 1e-3: the
# measured difference is 1.4e-4 (in conv1's gradient: a freshly initialised ResNet's backward
# through 19 BatchNorms is ill-conditioned, every BN backward subtracts two nearly cancelling
# means, so the other summation order grows from 1e-8 in layer3 to 1e-4 at conv1), while 2 ranks
# without --sync-bn differ by 0.26 (the control below must differ by more than 1e-3). The exact
# arithmetic of the split statistics is tested in tests/layers/test_batchnorm.c.
set(RG_EQUIV_resnet20_syncbn --model resnet20 --optim sgd --lr 0.05 --momentum 0.9 --max-steps 1
    --sync-bn)
# The ResNet recipe's optimizer: SGD with Nesterov momentum and no weight decay on the 1-D
# parameters, which ZeRO-1 must find by name among its shards' 1-D pieces. The control without
# --no-wd-bn-bias differs by lr (1 + momentum) wd |w| = 4.75e-3 in the BatchNorm weights (w = 1).
set(RG_EQUIV_resnet20_nesterov --model resnet20 --optim sgd --lr 0.05 --momentum 0.9 --nesterov
    --weight-decay 0.05 --max-steps 1 --sync-bn)
set(RG_EQUIV_resnet20_nowd ${RG_EQUIV_resnet20_nesterov} --no-wd-bn-bias)
foreach(cfg mlp_adam mlp_sgd cnn_sgd cnn_sgd_aug mlp_sgd0 resnet20_syncbn resnet20_nowd)
  rg_train_test(equiv/ref_${cfg} 1 "" train ${RG_TRAIN_SH}/equiv.sh ref ${cfg} ${RG_EQUIV_${cfg}})
  set_tests_properties(train/equiv/ref_${cfg} PROPERTIES FIXTURES_SETUP rg_train_ref_${cfg})
endforeach()

# name  reference  ranks  comm  tolerance  extra flags
set(RG_EQUIV_RUNS
  "mlp_adam_np2_mpi|mlp_adam|2|mpi|1e-4"
  "mlp_adam_np2_ring|mlp_adam|2|ring|1e-4"
  "mlp_adam_np3_mpi|mlp_adam|3|mpi|1e-4"
  "mlp_adam_np3_ring|mlp_adam|3|ring|1e-4"
  "mlp_adam_np2_mpi_accum2|mlp_adam|2|mpi|1e-4|--batch-size|12|--accum-steps|2"
  "mlp_adam_np2_ring_no_overlap|mlp_adam|2|ring|1e-4|--no-overlap"
  "mlp_sgd_np2_ring|mlp_sgd|2|ring|1e-6"
  "mlp_sgd_np3_mpi|mlp_sgd|3|mpi|1e-6"
  "cnn_sgd_np2_mpi|cnn_sgd|2|mpi|1e-4"
  "cnn_sgd_np3_ring|cnn_sgd|3|ring|1e-4"
  "cnn_sgd_aug_np2_mpi|cnn_sgd_aug|2|mpi|1e-4"
  "resnet20_syncbn_np2_mpi|resnet20_syncbn|2|mpi|1e-3"
  "resnet20_nowd_np2_mpi|resnet20_nowd|2|mpi|1e-3")
# --strategy zero1 (ZeRO-1, dist/zero1.c): the same weights as 1 rank (and so as ddp on N ranks),
# with the optimizer state sharded; its checkpoints hold the weights only.
set(RG_EQUIV_ZERO1_RUNS
  "zero1_mlp_adam_np2_mpi|mlp_adam|2|mpi|1e-4"
  "zero1_mlp_adam_np3_ring|mlp_adam|3|ring|1e-4"
  "zero1_mlp_sgd_np3_mpi|mlp_sgd|3|mpi|1e-6"
  "zero1_mlp_adam_np2_ring_accum2|mlp_adam|2|ring|1e-4|--batch-size|12|--accum-steps|2"
  "zero1_cnn_sgd_np2_mpi|cnn_sgd|2|mpi|1e-4"
  "zero1_resnet20_nowd_np2_ring|resnet20_nowd|2|ring|1e-3")
# rg_equiv_runs(MODE FLAGS RUN...): each RUN is "name|reference|ranks|comm|tolerance[|flags]", run
# by equiv.sh MODE (ranks: weights and optimizer state; weights: the weights only; ps: ranks is
# "K+W", K parameter servers and W workers) with FLAGS.
function(rg_equiv_runs mode flags)
  foreach(run ${ARGN})
    string(REPLACE "|" ";" run "${run}")
    list(GET run 0 name)
    list(GET run 1 cfg)
    list(GET run 2 np)
    set(ranks ${np})
    if(np MATCHES "^([0-9]+)\\+([0-9]+)$")
      set(ranks ${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
      math(EXPR np "${CMAKE_MATCH_1} + ${CMAKE_MATCH_2}")
    endif()
    list(GET run 3 comm)
    list(GET run 4 tol)
    set(extra "")
    list(LENGTH run n)
    if(n GREATER 5)
      list(SUBLIST run 5 -1 extra)
    endif()
    rg_train_test(equiv/${name} ${np} rg_train_ref_${cfg} "train;mpi" ${RG_TRAIN_SH}/equiv.sh
                  ${mode} ${cfg} ${name} ${ranks} ${comm} ${tol} ${RG_EQUIV_${cfg}} ${flags} ${extra})
  endforeach()
endfunction()
rg_equiv_runs(ranks "" ${RG_EQUIV_RUNS})
rg_equiv_runs(weights "--strategy;zero1" ${RG_EQUIV_ZERO1_RUNS})
# --strategy ps-sync|ps-async (dist/ps.c): K servers + W workers at 48/W per worker reach 1 rank's
# weights at 48, as ddp on W ranks does; ps-async with --max-staleness 0 is synchronous (plain SGD).
rg_equiv_runs(ps "--strategy;ps-sync"
  "ps_sync_mlp_adam_k1w2_mpi|mlp_adam|1+2|mpi|1e-4"
  "ps_sync_mlp_adam_k2w3_ring|mlp_adam|2+3|ring|1e-4"
  "ps_sync_cnn_sgd_k2w2_mpi|cnn_sgd|2+2|mpi|1e-4"
  "ps_sync_mlp_sgd0_k2w2_mpi|mlp_sgd0|2+2|mpi|1e-6")
rg_equiv_runs(ps "--strategy;ps-async;--max-staleness;0"
  "ps_async_s0_mlp_sgd0_k2w2_mpi|mlp_sgd0|2+2|mpi|1e-6"
  "ps_async_s0_mlp_sgd0_k1w3_ring|mlp_sgd0|1+3|ring|1e-6")
# control: ps-async with a staleness bound and a straggler must move off the synchronous weights
rg_train_test(equiv/ps_async_s4_straggle_control 3 rg_train_ref_mlp_sgd0 "train;mpi"
              ${RG_TRAIN_SH}/equiv.sh psdiffer mlp_sgd0 ps_async_s4_straggle_control 1 2 mpi 1e-6
              ${RG_EQUIV_mlp_sgd0} --strategy ps-async --max-staleness 4 --straggle 1:20)
rg_train_test(equiv/mlp_adam_control 1 rg_train_ref_mlp_adam train ${RG_TRAIN_SH}/equiv.sh differ
              mlp_adam mlp_adam_control 1e-4 ${RG_EQUIV_mlp_adam} --lr 0.00101)
rg_train_test(equiv/mlp_sgd_control 1 rg_train_ref_mlp_sgd train ${RG_TRAIN_SH}/equiv.sh differ
              mlp_sgd mlp_sgd_control 1e-6 ${RG_EQUIV_mlp_sgd} --lr 0.0505)
# the same run without augmentation must differ from the augmented reference (the crops matter)
rg_train_test(equiv/cnn_sgd_aug_control 1 rg_train_ref_cnn_sgd_aug train ${RG_TRAIN_SH}/equiv.sh
              differ cnn_sgd_aug cnn_sgd_aug_control 1e-4 ${RG_EQUIV_cnn_sgd})
rg_train_test(equiv/cnn_sgd_control 1 rg_train_ref_cnn_sgd train ${RG_TRAIN_SH}/equiv.sh differ
              cnn_sgd cnn_sgd_control 1e-4 ${RG_EQUIV_cnn_sgd} --lr 0.0505)
rg_train_test(equiv/resnet20_nowd_control 1 rg_train_ref_resnet20_nowd train
              ${RG_TRAIN_SH}/equiv.sh differ resnet20_nowd resnet20_nowd_control 1e-3
              ${RG_EQUIV_resnet20_nesterov})
rg_train_test(equiv/resnet20_no_syncbn_control 2 rg_train_ref_resnet20_syncbn "train;mpi"
              ${RG_TRAIN_SH}/equiv.sh ranks_differ resnet20_syncbn resnet20_no_syncbn_control 2 mpi
              1e-3 --model resnet20 --optim sgd --lr 0.05 --momentum 0.9 --max-steps 1)

# Models shaped by the data: a 32x32 IDX set with the CNN is exit 1 and a message, not a signal
rg_train_test(shape 1 "" train ${RG_TRAIN_SH}/shape.sh)
# The evaluation's batch: bounded on large images, never below --batch-size, and the accuracy
# independent of it on 1 and 2 ranks
rg_train_test(eval_batch 2 "" "train;mpi" ${RG_TRAIN_SH}/eval_batch.sh small)
rg_train_test(eval_batch_large 1 "" "train;san-twin" ${RG_TRAIN_SH}/eval_batch.sh large)
# header.sh: the two lines rank 0 prints before training (model, data, layout of the run)
rg_train_test(header 3 "" "train;mpi" ${RG_TRAIN_SH}/header.sh)
# BatchNorm's batches: one image per channel is exit 1 (or a dropped last batch), --sync-bn
# where it cannot work is exit 1, a pipeline's last batch under --micro-batches trains
rg_train_test(bn_batch 2 "" "train;mpi" ${RG_TRAIN_SH}/bn_batch.sh)

# ---- failures, the timeline, resuming
foreach(mode kill kill_pipeline mismatch options nodata nodata1 flags ps_kill oom)
  rg_train_test(fail_${mode} 2 "" "train;mpi" ${RG_TRAIN_SH}/fail.sh ${mode})
endforeach()
# without --sync-bn every rank ends with rank 0's BatchNorm buffers (ddp and zero1)
rg_train_test(bn_buffers_ddp 2 "" "train;mpi" ${RG_TRAIN_SH}/bn_buffers.sh ddp)
rg_train_test(bn_buffers_zero1 2 "" "train;mpi" ${RG_TRAIN_SH}/bn_buffers.sh zero1)
rg_train_test(timeline 2 "" "train;mpi" ${RG_TRAIN_SH}/timeline.sh)
rg_train_test(timeline_ps 3 "" "train;mpi" ${RG_TRAIN_SH}/timeline.sh ps)
# --strategy pipeline: 2 stages == one process; 2 pipelines of 2 stages (4 ranks) == ddp on 2
rg_train_test(pipeline_single 2 "" "train;mpi" ${RG_TRAIN_SH}/pipeline.sh single)
rg_train_test(pipeline_dp 4 "" "train;mpi" ${RG_TRAIN_SH}/pipeline.sh dp)
rg_train_test(lr_rules 1 "" "train;san-twin" ${RG_TRAIN_SH}/lr.sh)
rg_train_test(resume 2 "" "train;mpi" ${RG_TRAIN_SH}/resume.sh)
rg_train_test(resume_augment 2 "" "train;mpi" ${RG_TRAIN_SH}/resume.sh augment --augment flip-crop
              --workers 2)
# zero1's checkpoints hold the whole optimizer state (gathered from every rank's shard), so a
# zero1 run resumes bit for bit too, with Adam's moments and SGD's momentum
rg_train_test(resume_zero1 2 "" "train;mpi" ${RG_TRAIN_SH}/resume.sh zero1 --strategy zero1)
rg_train_test(resume_zero1_sgd 2 "" "train;mpi;san-twin" ${RG_TRAIN_SH}/resume.sh zero1_sgd --strategy zero1
              --optim sgd --momentum 0.9 --save-every 3)
# so do the pipeline's (every stage's part gathered; the CNN's second dropout runs on stage 1),
# with Adam's moments and SGD's momentum; and one process resumes them, and they resume one
# process's file, within the CNN's SGD tolerance. Not with Adam: 10 steps of micro-batches against
# whole batches (other summation orders) once ended 4.1e-4 apart, in an fc1 weight whose gradient
# had stayed at rounding level (Adam's sqrt(v) 2e-9 against a median of 2.3e-5) and whose first
# moment had opposite signs in the two runs (-6.2e-9, +1.1e-9): Adam moves such an element by
# about lr either way. (That was with conv2's filter pass by Winograd; the direct pass's sums
# ended 9.4e-6 apart, within the 1e-5, by chance.)
rg_train_test(resume_pipeline 2 "" "train;mpi" ${RG_TRAIN_SH}/resume.sh pipeline --same-only
              --strategy pipeline --model cnn --micro-batches 3)
rg_train_test(resume_pipeline_sgd 2 "" "train;mpi;san-twin" ${RG_TRAIN_SH}/resume.sh pipeline_sgd
              --strategy pipeline --model cnn --micro-batches 3 --save-every 3 --optim sgd
              --momentum 0.9)
# and the parameter servers' (the servers' shards of the weights and the state gathered on rank
# 0 at each epoch's end, and at each --save-every step under ps-sync, and scattered back on
# --resume); one worker of ps-sync is one process
rg_train_test(resume_ps_sync 2 "" "train;mpi" ${RG_TRAIN_SH}/resume.sh ps_sync --strategy ps-sync
              --servers 1 --optim sgd --momentum 0.9 --save-every 3)

# ---- 2 simulated hosts
rg_train_test(cluster 2 "" "train;mpi;cluster" ${RG_TRAIN_SH}/cluster.sh ${CMAKE_SOURCE_DIR}/scripts/sim-cluster.sh)
set_tests_properties(train/cluster PROPERTIES SKIP_RETURN_CODE 77)

# ---- reliability (issue 10): divergence, signals, output paths, configuration agreement, resume
#   nonfinite.sh  a NaN loss stops training naming the step, rank and tensor; valid --json;
#                 the last checkpoint kept
rg_train_test(nonfinite_np1 1 "" train ${RG_TRAIN_SH}/nonfinite.sh 1)
rg_train_test(nonfinite_np2 2 "" "train;mpi" ${RG_TRAIN_SH}/nonfinite.sh 2)
rg_train_test(nonfinite_pipeline 2 "" "train;mpi" ${RG_TRAIN_SH}/nonfinite.sh 2 _pipeline
              --strategy pipeline)
rg_train_test(nonfinite_ps_async 3 "" "train;mpi" ${RG_TRAIN_SH}/nonfinite.sh 3 _ps_async
              --strategy ps-async --servers 1)
#   interrupt.sh  output paths checked at start-up, SIGPIPE, SIGTERM/SIGINT (also on one rank of
#                 two), --save-every/--keep
foreach(mode outputs pipe term1 int2 term_setup every)
  rg_train_test(interrupt_${mode} 1 "" train ${RG_TRAIN_SH}/interrupt.sh ${mode})
endforeach()
rg_train_test(interrupt_term_rank1 2 "" "train;mpi" ${RG_TRAIN_SH}/interrupt.sh term_rank1)
rg_train_test(interrupt_term_rank1_pipeline 2 "" "train;mpi" ${RG_TRAIN_SH}/interrupt.sh
              term_rank1_pipeline)
foreach(mode term_rank1_ps_async term_server_ps_sync)
  rg_train_test(interrupt_${mode} 3 "" "train;mpi" ${RG_TRAIN_SH}/interrupt.sh ${mode})
endforeach()
#   agree.sh      ranks that differ in backend, batch, hyperparameters, --save, data size: every
#                 rank fails before training, naming the setting and the ranks' values
foreach(mode comm hyper save1 init datasize)
  rg_train_test(agree_${mode} 2 "" "train;mpi" ${RG_TRAIN_SH}/agree.sh ${mode})
endforeach()
#   resume_world.sh  2 -> 1 -> 3 ranks at global batch 96 = one uninterrupted run; impossible
#                 resumes fail; --lr overrides a checkpoint; a finished run reports its accuracy
rg_train_test(resume_world 3 "" "train;mpi" ${RG_TRAIN_SH}/resume_world.sh)
rg_train_test(resume_world_zero1 3 "" "train;mpi" ${RG_TRAIN_SH}/resume_world.sh _zero1 --strategy zero1)
#   reliability.sh  every bad input and fault of issue 10 (the table of docs/RELIABILITY.md):
#                 nothing aborts, hangs or loses a checkpoint
rg_train_test(reliability 2 "" "train;mpi" ${RG_TRAIN_SH}/reliability.sh)
