// How stored plans compare: the time a plan is judged by, its speed-up, which of two plans is
// better (BestPlan, export), which one an import keeps, and the listing order QueryPlans pages
// through with its opaque page token. Pure functions, safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "db/plan_store.h"
#include "proto/plan.pb.h"

namespace fusor::db {

// The measured end-to-end time when there is one, else the predicted time.
double EffectiveTimeNs(const v1::Plan& plan);

// Unfused time over fused time: measured over measured when both were measured, else predicted
// over predicted; nullopt when neither pair is known.
std::optional<double> SpeedUp(const v1::Plan& plan);

// True when a is strictly better than b: a measured plan beats an unmeasured one (a measurement is
// evidence, a prediction a hope), then the lower EffectiveTimeNs wins, then the newer plan.
bool BetterPlan(const v1::Plan& a, const v1::Plan& b);

// The import rule for two plans under one key: the newer plan wins (it was made with the later
// calibration and code); on equal creation times the better one does.
bool IncomingPlanWins(const v1::Plan& incoming, const v1::Plan& existing);

// Where a plan sits in listing order: newest first, then by key ascending.
struct ListingPosition {
  int64_t created_unix_ms = 0;
  PlanKey key;

  static ListingPosition Of(const v1::Plan& plan) {
    return {plan.created_unix_ms(), PlanKey::Of(plan)};
  }
};

// True when a comes before b in listing order.
bool ListedBefore(const ListingPosition& a, const ListingPosition& b);

// A page token naming the last plan of a page; the next page starts strictly after it. Tokens are
// the same for every store, so one token pages through a LayeredPlanStore as a whole.
std::string EncodePageToken(const ListingPosition& last);
StatusOr<ListingPosition> DecodePageToken(std::string_view token);

}  // namespace fusor::db
