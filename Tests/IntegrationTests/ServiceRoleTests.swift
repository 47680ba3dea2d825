import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing

@testable import Settings
@testable import Storage

/// The harnesses run the API and the daemons as the services' role with the rights `deploy/grants.sql` gives it, as
/// the guide deploys them: every integration test that uses them is also a test of those grants.
@Suite struct ServiceRoleTests {
    @Test func theAPIConnectsAsTheServicesRoleWhichCannotChangeKeysOrTheSchema() async throws {
        try await APIHarness.run { api in
            let joined = try await api.post([
                "cmd": "join", "udid": Device.udid(1), "token": Device.token(1), "name": "Ann", "code": "room",
            ])
            #expect(joined.status == .ok)
            let roles = try await TestDatabase.scalar(
                api.url,
                """
                SELECT coalesce(string_agg(DISTINCT usename, ','), '') FROM pg_stat_activity
                WHERE datname = current_database() AND usename <> current_user
                """,
                as: String.self
            )
            #expect(roles == TestDatabase.serviceRole, "the API's connections")
            let service = TestDatabase.service(api.url)
            for statement in [
                "DELETE FROM api_keys", "UPDATE apps SET bundle_id = 'x'", "TRUNCATE push_queue", "ALTER TABLE push_queue ADD COLUMN x int",
                "CREATE TABLE intruder (x int)",
            ] {
                await #expect(throws: PSQLError.self, "\(statement)") { try await TestDatabase.admin(service, statement) }
            }
            // What it may do, it does: the rows the join wrote.
            #expect(try await TestDatabase.scalar(service, "SELECT count(*) FROM active_users", as: Int64.self) == 1)
            // A table a later migration creates: readable by default, never writable until grants.sql says so.
            try await TestDatabase.admin(api.url, "CREATE TABLE later_secrets (x int)")
            try await TestDatabase.admin(api.url, "INSERT INTO later_secrets VALUES (1)")
            #expect(try await TestDatabase.scalar(service, "SELECT count(*) FROM later_secrets", as: Int64.self) == 1)
            for statement in ["INSERT INTO later_secrets VALUES (2)", "UPDATE later_secrets SET x = 3", "DELETE FROM later_secrets"] {
                await #expect(throws: PSQLError.self, "\(statement)") { try await TestDatabase.admin(service, statement) }
            }
        }
    }
}
