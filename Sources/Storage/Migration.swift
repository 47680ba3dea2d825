import APNs
import Foundation
import Settings
import Support

/// One numbered plain-SQL file in `migrations/`, such as `001_initial_schema.sql`.
package struct Migration: Sendable, Equatable {
    /// The leading number; migrations apply in ascending order.
    package let version: Int
    /// The file name without the number and extension (`initial_schema`).
    package let name: String
    /// The file name, for messages.
    package let fileName: String
    /// The file's SQL text.
    package let sql: String

    package init(version: Int, name: String, fileName: String, sql: String) {
        self.version = version
        self.name = name
        self.fileName = fileName
        self.sql = sql
    }

    /// A contract migration (first line `-- pushchat:contract`) removes or replaces what releases before this one use:
    /// `migrate` leaves it pending on a database that has migrations already (those releases keep running on the
    /// schema, for a rollback), and `migrate --contract` applies it once none of them will run again.
    package var isContract: Bool { markers.contains("contract") }

    /// Applied statement by statement outside a transaction (`-- pushchat:no-transaction`: `CREATE INDEX
    /// CONCURRENTLY`, `DROP INDEX CONCURRENTLY`).
    package var isTransactional: Bool { !markers.contains("no-transaction") }

    /// The `-- pushchat:MARKER` lines the file starts with (a contract migration may also run outside a transaction).
    var markers: Set<String> {
        var markers = Set<String>()
        for line in sql.split(separator: "\n", omittingEmptySubsequences: false) {
            guard line.hasPrefix("-- pushchat:") else { break }
            markers.insert(String(line.dropFirst("-- pushchat:".count)).trimmingWhitespace())
        }
        return markers
    }

    /// A short fingerprint of the SQL, stored when applied, to notice files edited afterwards.
    package var checksum: String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in sql.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return String(hash, radix: 16)
    }

    /// Reads every `NNN_name.sql` file in `directory`, sorted by version.
    package static func load(from directory: String) throws(DatabaseError) -> [Migration] {
        let files: [String]
        do {
            files = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw DatabaseError(code: .badMigrationFile, context: "reading \(directory)", reason: "cannot list the migrations folder")
        }
        var migrations: [Migration] = []
        for file in files.sorted() where file.hasSuffix(".sql") {
            let stem = file.dropLast(4)
            let digits = stem.prefix(while: \.isNumber)
            guard let version = Int(digits), stem.dropFirst(digits.count).first == "_" else {
                throw DatabaseError(
                    code: .badMigrationFile,
                    context: "\(directory)/\(file)",
                    reason: "migration files must be named NNN_description.sql"
                )
            }
            guard let data = FileManager.default.contents(atPath: "\(directory)/\(file)"),
                let sql = String(data: data, encoding: .utf8)
            else {
                throw DatabaseError(code: .badMigrationFile, context: "\(directory)/\(file)", reason: "cannot read the file as UTF-8")
            }
            if let clash = migrations.first(where: { $0.version == version }) {
                throw DatabaseError(
                    code: .badMigrationFile,
                    context: "\(directory)/\(file)",
                    reason: "version \(version) is also used by \(clash.fileName)"
                )
            }
            migrations.append(Migration(version: version, name: String(stem.dropFirst(digits.count + 1)), fileName: file, sql: sql))
        }
        return migrations.sorted { $0.version < $1.version }
    }
}
