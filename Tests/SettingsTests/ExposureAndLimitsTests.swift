import Foundation
import Testing

@testable import Settings
@testable import Support

@Suite struct ExposureAndLimitsTests {
    static func load(_ mode: Mode, _ environment: [String: String]) throws(ConfigurationError) -> Configuration {
        try Configuration(
            source: ConfigurationSource(mode: mode, environment: ["PUSHCHAT_DATABASE_URL": "postgres://u@h/d"].merging(environment) { $1 })
        )
    }

    @Test func testPagesAreOffInProductionUnlessAskedFor() throws {
        #expect(try Self.load(.development, [:]).exposure.testPages)
        #expect(try !Self.load(.production, [:]).exposure.testPages)
        #expect(try Self.load(.production, ["PUSHCHAT_API_TEST_PAGES": "true"]).exposure.testPages)
        let error = #expect(throws: ConfigurationError.self) { try Self.load(.production, ["PUSHCHAT_API_TEST_PAGES": "maybe"]) }
        #expect(error?.key == "PUSHCHAT_API_TEST_PAGES")
    }

    @Test func metricsListenOnLoopbackByDefault() throws {
        let exposure = try Self.load(.production, [:]).exposure
        #expect(exposure.metricsHost == "127.0.0.1")
        #expect(exposure.metricsPort == 44449)
        #expect(try Self.load(.production, ["PUSHCHAT_API_METRICS_PORT": "0"]).exposure.metricsPort == 0)
        #expect(throws: ConfigurationError.self) { try Self.load(.production, ["PUSHCHAT_API_METRICS_PORT": "70000"]) }
    }

    @Test func pruneLimitIsACountOrAShare() throws {
        #expect(PruneLimit(parsing: "250") == .count(250))
        #expect(PruneLimit(parsing: "10%") == .share(0.1))
        #expect(PruneLimit(parsing: "-1") == nil)
        #expect(PruneLimit(parsing: "101%") == nil)
        #expect(PruneLimit.default.limit(usersWithToken: 5000) == 500)
        #expect(PruneLimit.default.limit(usersWithToken: 3) == 1, "one stale token may always go")
        #expect(try Self.load(.production, [:]).feedbackMaxPrune == .share(0.1))
        #expect(throws: ConfigurationError.self) { try Self.load(.production, ["PUSHCHAT_FEEDBACK_MAX_PRUNE": "lots"]) }
    }

    @Test func sessionTimeoutsAreSettings() throws {
        let defaults = try Self.load(.production, [:]).databaseURL
        #expect(defaults.statementTimeout == .seconds(30))
        #expect(defaults.lockTimeout == .seconds(10))
        let set = try Self.load(.production, ["PUSHCHAT_DATABASE_STATEMENT_TIMEOUT": "2m", "PUSHCHAT_DATABASE_LOCK_TIMEOUT": "0"])
        #expect(set.databaseURL.statementTimeout == .seconds(120))
        #expect(set.databaseURL.lockTimeout == .zero)
    }

    @Test func poolSizeIsASetting() throws {
        #expect(try Self.load(.production, [:]).databaseURL.connections == 10)
        #expect(try Self.load(.production, ["PUSHCHAT_DATABASE_CONNECTIONS": "4"]).databaseURL.connections == 4)
        for bad in ["0", "1001", "many"] {
            let error = try #require(throws: ConfigurationError.self) {
                try Self.load(.production, ["PUSHCHAT_DATABASE_CONNECTIONS": bad])
            }
            #expect(error.description.contains("PUSHCHAT_DATABASE_CONNECTIONS"))
            #expect(error.description.contains("from 1 to 1000"))
        }
    }
}
