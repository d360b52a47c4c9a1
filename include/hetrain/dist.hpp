// hetrain/dist.hpp — the distributed machinery of synchronous heterogeneity-aware data parallelism.
//
//   dist/world.hpp         MPI start-up, rank/host facts, abort, config and replica checks
//   dist/communicator.hpp  gradient reduction interface (MPI here; NCCL in the CUDA backend), flat or hierarchical
//   dist/buckets.hpp       gradient buckets reduced while backward goes on
//   dist/balance.hpp       cost model, split solver, balancing decisions (pure, no MPI)
//   dist/balancer.hpp      the Balancer every rank calls each step (allgathers fitted models)
//   dist/emulate.hpp       emulated heterogeneity (sleeps) for tests and benchmarks
//   dist/agreement.hpp     one rank's failure becomes an error every rank throws
//   dist/arrival.hpp       the per-step agreement of all ranks, with a stall watchdog
//   dist/elastic.hpp       async/hybrid modes: the shared center model and sample counter (MPI RMA)
#pragma once

#include "hetrain/dist/agreement.hpp"
#include "hetrain/dist/arrival.hpp"
#include "hetrain/dist/balance.hpp"
#include "hetrain/dist/balancer.hpp"
#include "hetrain/dist/buckets.hpp"
#include "hetrain/dist/communicator.hpp"
#include "hetrain/dist/elastic.hpp"
#include "hetrain/dist/emulate.hpp"
#include "hetrain/dist/powersgd.hpp"
#include "hetrain/dist/wire.hpp"
#include "hetrain/dist/world.hpp"
