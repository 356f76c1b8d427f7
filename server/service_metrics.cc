#include "server/service_metrics.h"

namespace fusor {

ServiceMetrics& Metrics() {
  static ServiceMetrics* m = [] {
    metrics::Registry& r = metrics::Registry::Default();
    auto* made = new ServiceMetrics{
        r.AddCounter("fusor_rpc_requests_total",
                     "FusionTuner RPCs handled, by method and gRPC status code",
                     {"method", "code"}),
        r.AddHistogram("fusor_rpc_duration_seconds",
                       "Time from an RPC's arrival to its status, by method and gRPC status code",
                       {"method", "code"}, metrics::DurationBuckets()),
        r.AddCounter("fusor_tune_joins_total",
                     "Tune requests that joined an identical queued or running job"),
        r.AddCounter("fusor_plan_cache_lookups_total",
                     "Plan cache lookups by RPC (Tune, GetPlan) and result (hit, miss, stale)",
                     {"rpc", "result"}),
        r.AddHistogram("fusor_search_duration_seconds",
                       "Plan search time per tuning job that searched, by algorithm", {"algorithm"},
                       metrics::DurationBuckets()),
        r.AddHistogram("fusor_measure_duration_seconds",
                       "Measured refinement time per tuning job that measured on this CPU", {},
                       metrics::DurationBuckets()),
        r.AddHistogram("fusor_db_operation_duration_seconds", "Tuning database calls, by operation",
                       {"operation"}, metrics::DurationBuckets()),
        r.AddCounter("fusor_measurement_leases_total",
                     "Measurement jobs leased to agents by this replica, by target", {"target"}),
        r.AddCounter("fusor_measurement_releases_total",
                     "Leases of a measurement job whose earlier agent's lease expired, by target",
                     {"target"}),
    };
    // The families without labels have one series: listed (at 0) from the first scrape on.
    made->tune_joins.With({});
    made->measure_seconds.With({});
    return made;
  }();
  return *m;
}

}  // namespace fusor
