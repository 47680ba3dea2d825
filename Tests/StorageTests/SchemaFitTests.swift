import Foundation
import Testing

@testable import Storage

/// `migrate --check`: whether a release and a schema go together, from the migration statuses alone.
@Suite struct SchemaFitTests {
    static func status(_ version: Int, applied: Bool, file: Bool = true, contract: Bool = false) -> Migrator.Status {
        Migrator.Status(
            version: version,
            fileName: "00\(version)_m.sql",
            appliedAt: applied ? Date(timeIntervalSince1970: 0) : nil,
            modified: false,
            hasFile: file,
            contract: contract
        )
    }

    @Test func everyMigrationAppliedFits() {
        #expect(Migrator.Fit([Self.status(1, applied: true), Self.status(2, applied: true)]) == .fits)
    }

    @Test func newerMigrationsOfANewerReleaseStillFit() {
        let statuses = [Self.status(1, applied: true), Self.status(2, applied: true, file: false)]
        #expect(Migrator.Fit(statuses) == .ahead(["002_m.sql"]))
    }

    @Test func aPendingMigrationIsBehindEvenWhenNewerOnesAreApplied() {
        let statuses = [Self.status(1, applied: true), Self.status(2, applied: false), Self.status(3, applied: true, file: false)]
        #expect(Migrator.Fit(statuses) == .behind(["002_m.sql"]))
        #expect(Migrator.Fit([]) == .fits)
    }

    /// A contract migration waits for `migrate --contract`: pending, it holds no release back; applied by a newer
    /// release, it removed what older ones use.
    @Test func contractMigrationsWaitAndThenShutOlderReleasesOut() {
        let pending = [Self.status(1, applied: true), Self.status(2, applied: false, contract: true)]
        #expect(Migrator.Fit(pending) == .fits)
        let newer = [
            Self.status(1, applied: true), Self.status(2, applied: true, file: false, contract: true),
            Self.status(3, applied: true, file: false),
        ]
        #expect(Migrator.Fit(newer) == .removed(["002_m.sql"]))
        #expect(
            Migrator.Fit([Self.status(1, applied: false), Self.status(2, applied: true, file: false, contract: true)])
                == .behind(["001_m.sql"])
        )
    }

    /// A migration's first comment lines say how it is applied; a contract migration may also run outside a transaction.
    @Test func markersAreReadFromTheLeadingLines() {
        let both = Migration(
            version: 17,
            name: "x",
            fileName: "017_x.sql",
            sql: "-- pushchat:contract\n-- pushchat:no-transaction\nDROP INDEX CONCURRENTLY i;"
        )
        #expect(both.isContract && !both.isTransactional)
        let plain = Migration(
            version: 15,
            name: "y",
            fileName: "015_y.sql",
            sql: "-- Broadcasts.\n-- pushchat:contract\nALTER TABLE t ADD c int;"
        )
        #expect(!plain.isContract && plain.isTransactional, "only the leading marker lines count")
        let concurrent = Migration(
            version: 16,
            name: "z",
            fileName: "016_z.sql",
            sql: "-- pushchat:no-transaction\n-- Indexes.\nCREATE INDEX CONCURRENTLY i ON t (c);"
        )
        #expect(!concurrent.isContract && !concurrent.isTransactional)
    }
}
