// PostgresPlanStore::LockPlanKey: a PostgreSQL session advisory lock on a connection of its own,
// so fusord replicas sharing the database search one plan key once, and a replica that dies
// releases its lock with its session.
#include <chrono>
#include <thread>

#include "db/postgres_plan_store.h"
#include "db/postgres_sql.h"
#include "db/store_rules.h"

namespace fusor::db {
namespace {

// A session advisory lock held on a connection of its own; closing the connection releases it.
template <typename Connection>
class SessionLock final : public PlanKeyLock {
 public:
  explicit SessionLock(std::unique_ptr<Connection> connection)
      : connection_(std::move(connection)) {}

 private:
  std::unique_ptr<Connection> connection_;
};

}  // namespace

StatusOr<std::unique_ptr<PlanKeyLock>> PostgresPlanStore::LockPlanKey(
    const PlanKey& key, const std::atomic<bool>* cancelled) {
  FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<Connection> connection, NewConnection());
  // The plan key's lock id is the second key of a two-key advisory lock.
  int32_t id = static_cast<int32_t>(PlanKeyLockId(key));
  try {
    for (;;) {
      bool held = false;
      {
        pqxx::nontransaction txn(connection->pq);
        held = txn.exec_params1("SELECT pg_try_advisory_lock($1, $2)", kTuneLock, id)[0].as<bool>();
      }
      if (held)
        return std::unique_ptr<PlanKeyLock>(
            std::make_unique<SessionLock<Connection>>(std::move(connection)));
      if (cancelled != nullptr && cancelled->load()) {
        return Status::Cancelled("cancelled while another replica tuned the same graph");
      }
      // Polled rather than blocking in pg_advisory_lock, so a cancelled wait ends promptly.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (const std::exception& e) {
    return Status::Unavailable(fmt::format(
        "PostgreSQL database '{}' went away while waiting for another replica's tune of graph {}: "
        "{}",
        name_, ShortHash(key.graph_hash), e.what()));
  }
}

}  // namespace fusor::db
