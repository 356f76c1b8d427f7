// TuningDatabase: one whole tuning database, every concern of it: its plans (PlanStore), its
// calibration and residual logs (CalibrationLog) and its measurement queue (MeasurementQueue).
// SqlitePlanStore (one file) and PostgresPlanStore (one PostgreSQL database) are one;
// OpenTuningDatabase (open_plan_store.h) opens either. Code that needs one concern takes that
// interface; fusord, which serves all three from one database, holds a TuningDatabase.
//
// Safe to call from many threads at once, as each of its interfaces is.
#pragma once

#include "db/calibration_log.h"
#include "db/measurement_queue.h"
#include "db/plan_store.h"

namespace fusor::db {

class TuningDatabase : public PlanStore, public CalibrationLog, public MeasurementQueue {};

}  // namespace fusor::db
