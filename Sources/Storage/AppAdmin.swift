import Foundation
import Logging
package import PostgresNIO
package import Settings

/// `pushchat-api apps add|list|update|disable|enable`: the apps this server sends for, on one connection; and the
/// daemons' reads of them.
package struct AppAdmin: Sendable {
    let connection: PostgresConnection
    let logger: Logger

    package init(connection: PostgresConnection, logger: Logger) {
        self.connection = connection
        self.logger = logger
    }

    static let columns =
        "name, bundle_id, environment, transport, key_file, key_id, team_id, certificate, passphrase_file, created_at, updated_at, disabled_at, fcm_service_account_file, webpush_vapid_key_file, webpush_subject, webpush_public_key"

    /// Adds an app; false when one of that name exists.
    package func add(name: String, settings: App.Settings) async throws -> Bool {
        let row = Self.Row(settings)
        let rows = try await connection.query(
            """
            INSERT INTO apps (name, bundle_id, environment, transport, key_file, key_id, team_id, certificate, passphrase_file,
                              fcm_service_account_file, webpush_vapid_key_file, webpush_subject, webpush_public_key)
            VALUES (\(name), \(row.bundleID), \(row.environment), \(row.transport), \(row.keyFile), \(row.keyID), \(row.teamID),
                    \(row.certificate), \(row.passphraseFile), \(row.fcmServiceAccountFile), \(row.webPushVAPIDKeyFile),
                    \(row.webPushSubject), \(row.webPushPublicKey))
            ON CONFLICT (name) DO NOTHING RETURNING 1
            """,
            logger: logger
        )
        return try await rows.collect().count > 0
    }

    /// Replaces an app's settings (stamping `updated_at`, which the push daemon watches); false when there is none.
    package func update(name: String, settings: App.Settings) async throws -> Bool {
        let row = Self.Row(settings)
        let rows = try await connection.query(
            """
            UPDATE apps SET bundle_id = \(row.bundleID), environment = \(row.environment), transport = \(row.transport),
                key_file = \(row.keyFile), key_id = \(row.keyID), team_id = \(row.teamID), certificate = \(row.certificate),
                passphrase_file = \(row.passphraseFile), fcm_service_account_file = \(row.fcmServiceAccountFile),
                webpush_vapid_key_file = \(row.webPushVAPIDKeyFile), webpush_subject = \(row.webPushSubject),
                webpush_public_key = \(row.webPushPublicKey), updated_at = now()
            WHERE name = \(name) RETURNING 1
            """,
            logger: logger
        )
        return try await rows.collect().count > 0
    }

    /// Replaces an app's settings only if they are still `current` (what an update read and merged into); false when
    /// the app is gone or another update came in between.
    package func update(name: String, settings: App.Settings, expecting current: App.Settings) async throws -> Bool {
        let (row, was) = (Self.Row(settings), Self.Row(current))
        let rows = try await connection.query(
            """
            UPDATE apps SET bundle_id = \(row.bundleID), environment = \(row.environment), transport = \(row.transport),
                key_file = \(row.keyFile), key_id = \(row.keyID), team_id = \(row.teamID), certificate = \(row.certificate),
                passphrase_file = \(row.passphraseFile), fcm_service_account_file = \(row.fcmServiceAccountFile),
                webpush_vapid_key_file = \(row.webPushVAPIDKeyFile), webpush_subject = \(row.webPushSubject),
                webpush_public_key = \(row.webPushPublicKey), updated_at = now()
            WHERE name = \(name) AND bundle_id = \(was.bundleID) AND environment = \(was.environment) AND transport = \(was.transport)
              AND key_file IS NOT DISTINCT FROM \(was.keyFile) AND key_id IS NOT DISTINCT FROM \(was.keyID)
              AND team_id IS NOT DISTINCT FROM \(was.teamID) AND certificate IS NOT DISTINCT FROM \(was.certificate)
              AND passphrase_file IS NOT DISTINCT FROM \(was.passphraseFile)
              AND fcm_service_account_file IS NOT DISTINCT FROM \(was.fcmServiceAccountFile)
              AND webpush_vapid_key_file IS NOT DISTINCT FROM \(was.webPushVAPIDKeyFile)
              AND webpush_subject IS NOT DISTINCT FROM \(was.webPushSubject)
              AND webpush_public_key IS NOT DISTINCT FROM \(was.webPushPublicKey)
            RETURNING 1
            """,
            logger: logger
        )
        return try await rows.collect().count > 0
    }

    /// Disables (or enables again) an app; false when there is none, or it already was.
    package func setDisabled(name: String, _ disabled: Bool) async throws -> Bool {
        let rows = try await connection.query(
            """
            UPDATE apps SET disabled_at = CASE WHEN \(disabled) THEN now() END, updated_at = now()
            WHERE name = \(name) AND (disabled_at IS NOT NULL) <> \(disabled) RETURNING 1
            """,
            logger: logger
        )
        return try await rows.collect().count > 0
    }

    /// Every app, by name.
    package func list() async throws -> [App] {
        let rows = try await connection.query("SELECT \(unescaped: Self.columns) FROM apps ORDER BY name", logger: logger)
        var apps: [App] = []
        for try await row in rows { apps.append(try Self.decode(row)) }
        return apps
    }

    /// Rows waiting to be sent, by app (apps with none are absent).
    package func pending() async throws -> [String: Int] {
        let rows = try await connection.query(
            "SELECT app, count(*) FROM push_queue WHERE time_sent IS NULL AND time_failed IS NULL GROUP BY app",
            logger: logger
        )
        var pending: [String: Int] = [:]
        for try await (app, count) in rows.decode((String, Int64).self) { pending[app] = Int(count) }
        return pending
    }

    /// One app, or nil.
    package func find(_ name: String) async throws -> App? {
        let rows = try await connection.query("SELECT \(unescaped: Self.columns) FROM apps WHERE name = \(name)", logger: logger)
        for try await row in rows { return try Self.decode(row) }
        return nil
    }

    /// An app's settings as the table's columns.
    struct Row {
        var bundleID: String?
        var environment: String?
        var transport: String?
        var keyFile: String?
        var keyID: String?
        var teamID: String?
        var certificate: String?
        var passphraseFile: String?
        var fcmServiceAccountFile: String?
        var webPushVAPIDKeyFile: String?
        var webPushSubject: String?
        var webPushPublicKey: String?

        init(_ settings: App.Settings) {
            fcmServiceAccountFile = settings.fcmServiceAccountFile
            webPushVAPIDKeyFile = settings.webPushVAPIDKeyFile
            webPushSubject = settings.webPushSubject
            webPushPublicKey = settings.webPushPublicKey
            bundleID = settings.bundleID
            environment = settings.environment.rawValue
            transport = settings.transport.rawValue
            switch settings.credentials {
            case .token(let file, let key, let team): (keyFile, keyID, teamID) = (file, key, team)
            case .certificate(let path, let passphrase): (certificate, passphraseFile) = (path, passphrase)
            }
        }
    }

    /// A row of ``columns`` as an app (the table's constraints make every row one of the two shapes).
    static func decode(_ row: PostgresRow) throws -> App {
        let (
            name, bundleID, environment, transport, keyFile, keyID, teamID, certificate, passphraseFile, created, updated, disabled, fcm,
            vapid, subject, publicKey
        ) =
            try row.decode(
                (
                    String, String?, String?, String?, String?, String?, String?, String?, String?, Date, Date, Date?, String?, String?,
                    String?, String?
                )
                .self
            )
        var settings: App.Settings?
        if let bundleID, let environment = environment.flatMap(App.Environment.init(rawValue:)),
            let transport = transport.flatMap(APNsTransport.init(rawValue:))
        {
            let credentials: App.Credentials? =
                if let keyFile, let keyID, let teamID {
                    .token(keyFile: keyFile, keyID: keyID, teamID: teamID)
                } else if let certificate {
                    .certificate(path: certificate, passphraseFile: passphraseFile)
                } else {
                    nil
                }
            settings = credentials.map {
                App.Settings(
                    bundleID: bundleID,
                    environment: environment,
                    transport: transport,
                    credentials: $0,
                    fcmServiceAccountFile: fcm,
                    webPushVAPIDKeyFile: vapid,
                    webPushSubject: subject,
                    webPushPublicKey: publicKey
                )
            }
        }
        return App(name: name, settings: settings, createdAt: created, updatedAt: updated, disabledAt: disabled)
    }
}

/// The push daemon's view of the apps: read through its ``DatabaseClient`` (never waiting on a database that is away).
package struct AppCatalog: Sendable {
    let database: DatabaseClient
    let logger: Logger

    package init(database: DatabaseClient, logger: Logger) {
        self.database = database
        self.logger = logger
    }

    /// Every app, by name.
    package func apps() async throws -> [App] {
        let rows = try await database.query("SELECT \(unescaped: AppAdmin.columns) FROM apps ORDER BY name", logger: logger)
        return try rows.map(AppAdmin.decode)
    }
}
