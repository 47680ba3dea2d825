import ArgumentParser
import Foundation
import Settings
import Storage
import Support
import WebPush

/// `pushchat-api apps add|list|update|disable|enable`: the apps this server sends for.
struct AppsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apps",
        abstract: "Add, list, update, disable and enable the apps this server sends for (bundle id, environment, credentials).",
        subcommands: [Add.self, List.self, Update.self, Disable.self, Enable.self]
    )

    typealias Refusal = KeysCommand.Refusal

    /// What `add` and `update` say about an app.
    struct SettingsOptions: ParsableArguments {
        @Option(name: .customLong("bundle-id"), help: "The app's bundle id, e.g. com.example.PushChat (its notifications' topic).")
        var bundleID: String
        @Option(help: "Apple's environment: sandbox (development builds) or production.")
        var environment: String
        @Option(help: "binary (certificate only) or http2 (default).")
        var transport: String = "http2"
        @Option(
            name: .customLong("key-file"),
            help: "Token authentication: the .p8 signing key's absolute path (the push daemon reads it)."
        )
        var keyFile: String?
        @Option(name: .customLong("key-id"), help: "The signing key's 10-character id (default: from the file name AuthKey_<ID>.p8).")
        var keyID: String?
        @Option(name: .customLong("team-id"), help: "Your Apple developer team's 10-character id.")
        var teamID: String?
        @Option(help: "Certificate authentication: the client certificate and key's absolute path (PEM or .p12).")
        var certificate: String?
        @Option(
            name: .customLong("passphrase-file"),
            help: "The absolute path of a file holding the certificate key's passphrase (never on the command line)."
        )
        var passphraseFile: String?
        @Option(
            name: .customLong("fcm-service-account"),
            help: "Android: the absolute path of the app's Firebase service-account JSON file (the push daemon reads it)."
        )
        var fcmServiceAccount: String?
        @Option(
            name: .customLong("vapid-key-file"),
            help: "Browsers: the absolute path of the app's VAPID key (PEM, P-256; pushchat-api webpush generate-key writes one)."
        )
        var vapidKeyFile: String?
        @Option(
            name: .customLong("vapid-subject"),
            help: "Browsers: the app's VAPID subject, mailto:ADDRESS or an https: URL (default: webpush_subject)."
        )
        var vapidSubject: String?
        @Option(
            name: .customLong("vapid-public-key"),
            help: "Browsers: the key's public half as generate-key printed it (default: read from --vapid-key-file where this can read it)."
        )
        var vapidPublicKey: String?

        /// The settings, or the reason they cannot work.
        func settings() throws -> App.Settings {
            guard let environment = App.Environment(rawValue: environment) else {
                throw ValidationError("--environment: expected sandbox or production, got '\(environment)'")
            }
            guard let transport = APNsTransport(rawValue: transport) else {
                throw ValidationError("--transport: expected binary or http2, got '\(transport)'")
            }
            let credentials: App.Credentials
            switch (keyFile, certificate) {
            case (let keyFile?, nil):
                guard passphraseFile == nil else { throw ValidationError("--passphrase-file goes with --certificate, not --key-file") }
                credentials = try AppsCommand.token(keyFile: keyFile, keyID: keyID, teamID: teamID, was: nil)
            case (nil, let certificate?):
                guard keyID == nil, teamID == nil else {
                    throw ValidationError("--key-id and --team-id go with --key-file, not --certificate")
                }
                credentials = .certificate(path: certificate, passphraseFile: passphraseFile)
            case (nil, nil):
                throw ValidationError("give the app's credentials: --key-file (with --team-id) or --certificate")
            case (_?, _?):
                throw ValidationError("--key-file and --certificate contradict each other; give one")
            }
            let settings = App.Settings(
                bundleID: bundleID,
                environment: environment,
                transport: transport,
                credentials: credentials,
                fcmServiceAccountFile: fcmServiceAccount,
                webPushVAPIDKeyFile: vapidKeyFile,
                webPushSubject: vapidSubject,
                webPushPublicKey: try AppsCommand.vapidPublicKey(file: vapidKeyFile, given: vapidPublicKey)
            )
            if let problem = settings.problem { throw ValidationError(problem) }
            return settings
        }

        func validate() throws { _ = try settings() }

        /// Files the operator named that this process cannot see: said, not refused (the push daemon reads them as
        /// its own user; it alarms if it cannot).
        func missingFiles() -> [String] { AppsCommand.missing([keyFile, certificate, passphraseFile, fcmServiceAccount, vapidKeyFile]) }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add an app: its bundle id, environment, transport and credentials.")
        @Argument(help: "The app's name in keys and metrics: 1 to 64 lower-case letters, digits, '.', '-', '_'.")
        var name: String
        @OptionGroup var app: SettingsOptions
        @OptionGroup var options: ProcessOptions
        @OptionGroup var owner: RoleOption

        func validate() throws {
            guard App.isValidName(name) else {
                throw ValidationError("an app name is 1 to 64 lower-case letters, digits, '.', '-' or '_', starting with a letter or digit")
            }
        }

        func run() async throws {
            try await AppsCommand.save(
                name,
                app,
                options,
                owner,
                verb: "add",
                done: "Added",
                refusal: "an app named \(name) exists; change it with apps update"
            ) {
                admin,
                settings in try await admin.add(name: name, settings: settings)
            }
        }
    }

    /// What `update` changes: only the settings given; the others stay as they are.
    struct UpdateOptions: ParsableArguments {
        @Option(name: .customLong("bundle-id"), help: "The app's bundle id.")
        var bundleID: String?
        @Option(help: "Apple's environment: sandbox or production.")
        var environment: String?
        @Option(help: "binary (certificate only) or http2.")
        var transport: String?
        @Option(name: .customLong("key-file"), help: "Switch to (or change) token authentication: the .p8 key's absolute path.")
        var keyFile: String?
        @Option(name: .customLong("key-id"), help: "The signing key's 10-character id (default: from the file name, or as it was).")
        var keyID: String?
        @Option(name: .customLong("team-id"), help: "The team's 10-character id (default: as it was).")
        var teamID: String?
        @Option(help: "Switch to (or change) certificate authentication: the certificate and key's absolute path.")
        var certificate: String?
        @Option(name: .customLong("passphrase-file"), help: "The certificate key's passphrase file (absolute path).")
        var passphraseFile: String?
        @Option(name: .customLong("fcm-service-account"), help: "Android: the Firebase service-account file (absolute path).")
        var fcmServiceAccount: String?
        @Flag(name: .customLong("no-fcm-service-account"), help: "Android: remove the app's Firebase service account.")
        var noFCMServiceAccount = false
        @Option(name: .customLong("vapid-key-file"), help: "Browsers: the app's VAPID key file (absolute path).")
        var vapidKeyFile: String?
        @Option(name: .customLong("vapid-subject"), help: "Browsers: the app's VAPID subject (mailto: or https:).")
        var vapidSubject: String?
        @Option(name: .customLong("vapid-public-key"), help: "Browsers: the key's public half (default: read from --vapid-key-file).")
        var vapidPublicKey: String?
        @Flag(name: .customLong("no-vapid-key-file"), help: "Browsers: remove the app's VAPID key and subject.")
        var noVAPIDKeyFile = false

        func validate() throws {
            let given: [Any?] = [
                bundleID, environment, transport, keyFile, keyID, teamID, certificate, passphraseFile, fcmServiceAccount, vapidKeyFile,
                vapidSubject, vapidPublicKey,
            ]
            guard given.contains(where: { $0 != nil }) || noFCMServiceAccount || noVAPIDKeyFile else {
                throw ValidationError("give the settings to change (--bundle-id, --environment, --key-file, --certificate, …)")
            }
            if keyFile != nil && certificate != nil {
                throw ValidationError("--key-file and --certificate contradict each other; give one")
            }
            if fcmServiceAccount != nil && noFCMServiceAccount {
                throw ValidationError("--fcm-service-account and --no-fcm-service-account contradict each other")
            }
            if (vapidKeyFile != nil || vapidSubject != nil) && noVAPIDKeyFile {
                throw ValidationError("--vapid-key-file and --vapid-subject contradict --no-vapid-key-file")
            }
        }

        /// `current` with the settings given changed, or the reason the result cannot work.
        func merged(into current: App.Settings) throws -> App.Settings {
            var settings = current
            if let bundleID { settings.bundleID = bundleID }
            if let environment {
                guard let value = App.Environment(rawValue: environment) else {
                    throw ValidationError("--environment: expected sandbox or production, got '\(environment)'")
                }
                settings.environment = value
            }
            if let transport {
                guard let value = APNsTransport(rawValue: transport) else {
                    throw ValidationError("--transport: expected binary or http2, got '\(transport)'")
                }
                settings.transport = value
            }
            switch (current.credentials, keyFile, certificate) {
            case (_, let keyFile?, nil):
                guard passphraseFile == nil else { throw ValidationError("--passphrase-file goes with --certificate, not --key-file") }
                var was: (keyID: String, teamID: String)?
                if case .token(_, let keyID, let teamID) = current.credentials { was = (keyID, teamID) }
                settings.credentials = try AppsCommand.token(keyFile: keyFile, keyID: keyID, teamID: teamID, was: was)
            case (let credentials, nil, let certificate?):
                guard keyID == nil, teamID == nil else {
                    throw ValidationError("--key-id and --team-id go with --key-file, not --certificate")
                }
                var kept: String?
                if case .certificate(_, let file) = credentials { kept = file }
                settings.credentials = .certificate(path: certificate, passphraseFile: passphraseFile ?? kept)
            case (.token(let file, let oldKey, let oldTeam), nil, nil):
                guard passphraseFile == nil else {
                    throw ValidationError("--passphrase-file goes with a certificate; this app signs with a key")
                }
                if let keyID, let named = APNsSettings.keyID(fileName: file), named != keyID {
                    throw ValidationError("--key-id \(keyID) contradicts the key file's name (\(named)); give --key-file too")
                }
                settings.credentials = .token(keyFile: file, keyID: keyID ?? oldKey, teamID: teamID ?? oldTeam)
            case (.certificate(let path, let file), nil, nil):
                guard keyID == nil, teamID == nil else {
                    throw ValidationError("--key-id and --team-id go with a key; this app uses a certificate (give --key-file to switch)")
                }
                settings.credentials = .certificate(path: path, passphraseFile: passphraseFile ?? file)
            case (_, _?, _?):
                throw ValidationError("--key-file and --certificate contradict each other; give one")
            }
            if let fcmServiceAccount { settings.fcmServiceAccountFile = fcmServiceAccount }
            if noFCMServiceAccount { settings.fcmServiceAccountFile = nil }
            if let vapidKeyFile {
                settings.webPushVAPIDKeyFile = vapidKeyFile
                settings.webPushPublicKey = try AppsCommand.vapidPublicKey(file: vapidKeyFile, given: vapidPublicKey)
            } else if vapidPublicKey != nil {
                throw ValidationError("--vapid-public-key goes with --vapid-key-file")
            }
            if let vapidSubject { settings.webPushSubject = vapidSubject }
            if noVAPIDKeyFile { (settings.webPushVAPIDKeyFile, settings.webPushSubject, settings.webPushPublicKey) = (nil, nil, nil) }
            if let problem = settings.problem { throw ValidationError(problem) }
            return settings
        }

        func missingFiles() -> [String] { AppsCommand.missing([keyFile, certificate, passphraseFile, fcmServiceAccount, vapidKeyFile]) }
    }

    struct Update: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change an app's settings: only those given (the rest stay); the push daemon reconnects with them."
        )
        @Argument(help: "The app's name.")
        var name: String
        @OptionGroup var app: UpdateOptions
        @OptionGroup var options: ProcessOptions
        @OptionGroup var owner: RoleOption

        func validate() throws {
            guard name != App.defaultName else {
                throw ValidationError("the default app takes its settings from the configuration (PUSHCHAT_APNS_*): change them there")
            }
        }

        func run() async throws {
            try await QueueCommand.withConnection(options, program: "pushchat-api apps update", role: owner) { connection, logger in
                let admin = AppAdmin(connection: connection, logger: logger)
                guard let current = try await admin.list().first(where: { $0.name == name })?.settings else {
                    throw Refusal(reason: "no app named \(name); add it with apps add")
                }
                let settings = try app.merged(into: current)
                // Written only if the row is still what was read (another update in between is not overwritten).
                guard try await admin.update(name: name, settings: settings, expecting: current) else {
                    throw Refusal(reason: "app \(name) changed while this ran (or is gone); run the update again")
                }
                print("Updated app \(name): \(describe(settings))")
                for file in app.missingFiles() { print("warning: \(file) does not exist here; the push daemon must be able to read it") }
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List apps: name, bundle id, environment, transport, credentials, state, notifications waiting to be sent."
        )
        @OptionGroup var options: ProcessOptions

        func run() async throws {
            try await QueueCommand.withConnection(options, program: "pushchat-api apps list") { connection, logger in
                let admin = AppAdmin(connection: connection, logger: logger)
                let (apps, pending) = (try await admin.list(), try await admin.pending())
                print("name\tbundle id\tenvironment\ttransport\tcredentials\tstate\tpending")
                for app in apps {
                    let state = (app.disabledAt.map { "disabled \($0.formatted(.iso8601))" } ?? "enabled") + "\t\(pending[app.name] ?? 0)"
                    guard let settings = app.settings else {
                        print("\(app.name)\t(configuration)\t(configuration)\t(configuration)\tPUSHCHAT_APNS_*\t\(state)")
                        continue
                    }
                    let credentials =
                        switch settings.credentials {
                        case .token(let file, let key, let team): "key \(key) team \(team) \(file)"
                        case .certificate(let path, _): "certificate \(path)"
                        }
                    let android =
                        (settings.fcmServiceAccountFile.map { ", FCM \($0)" } ?? "")
                        + (settings.webPushVAPIDKeyFile.map { ", Web Push \($0)" } ?? "")
                    print(
                        "\(app.name)\t\(settings.bundleID)\t\(settings.environment.rawValue)\t\(settings.transport.rawValue)\t\(credentials)\(android)\t\(state)"
                    )
                }
            }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Disable an app: its keys get 403, its queued notifications stay queued and nothing is sent for it."
        )
        @Argument(help: "The app's name.")
        var name: String
        @OptionGroup var options: ProcessOptions
        @OptionGroup var owner: RoleOption

        func validate() throws {
            guard name != App.defaultName else {
                throw ValidationError(
                    "the default app cannot be disabled: it sends with the configuration's credentials (stop pushchat-push instead)"
                )
            }
        }

        func run() async throws { try await AppsCommand.setDisabled(name, true, options, owner) }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Enable a disabled app again.")
        @Argument(help: "The app's name.")
        var name: String
        @OptionGroup var options: ProcessOptions
        @OptionGroup var owner: RoleOption

        func run() async throws { try await AppsCommand.setDisabled(name, false, options, owner) }
    }

    /// The files named (nil: not given) that this process cannot see: said, not refused (the push daemon reads them
    /// as its own user; it alarms if it cannot).
    static func missing(_ files: [String?]) -> [String] {
        files.compactMap { $0 }.filter { !FileManager.default.fileExists(atPath: $0) }
    }

    /// Token credentials from `--key-file` (with `--key-id` and `--team-id`, or the ids the app had): the key id
    /// defaults to the one in Apple's file name, and must agree with it.
    static func token(keyFile: String, keyID: String?, teamID: String?, was: (keyID: String, teamID: String)?) throws -> App.Credentials {
        let named = APNsSettings.keyID(fileName: keyFile)
        guard let keyID = keyID ?? named ?? was?.keyID else {
            throw ValidationError("--key-id is required when the key file is not named AuthKey_<KEY ID>.p8")
        }
        if let named, named != keyID {
            throw ValidationError("--key-id \(keyID) contradicts the key file's name (\(named)); the file name is Apple's")
        }
        guard let teamID = teamID ?? was?.teamID else { throw ValidationError("--team-id is required with --key-file") }
        return .token(keyFile: keyFile, keyID: keyID, teamID: teamID)
    }

    /// `add` and `update`: the settings checked, written as the owner, described; files this process cannot see said.
    static func save(
        _ name: String,
        _ app: SettingsOptions,
        _ options: ProcessOptions,
        _ owner: RoleOption,
        verb: String,
        done: String,
        refusal: String,
        _ write: @escaping (AppAdmin, App.Settings) async throws -> Bool
    ) async throws {
        let settings = try app.settings()
        try await QueueCommand.withConnection(options, program: "pushchat-api apps \(verb)", role: owner) { connection, logger in
            guard try await write(AppAdmin(connection: connection, logger: logger), settings) else { throw Refusal(reason: refusal) }
            print("\(done) app \(name): \(describe(settings))")
            for file in app.missingFiles() { print("warning: \(file) does not exist here; the push daemon must be able to read it") }
        }
    }

    /// `disable` and `enable`.
    static func setDisabled(_ name: String, _ disabled: Bool, _ options: ProcessOptions, _ owner: RoleOption) async throws {
        let verb = disabled ? "disable" : "enable"
        try await QueueCommand.withConnection(options, program: "pushchat-api apps \(verb)", role: owner) { connection, logger in
            guard try await AppAdmin(connection: connection, logger: logger).setDisabled(name: name, disabled) else {
                throw Refusal(reason: "no \(disabled ? "enabled" : "disabled") app named \(name)")
            }
            print("\(disabled ? "Disabled" : "Enabled") app \(name)")
        }
    }

    /// The public half of the app's VAPID key, which the API serves its pages: `given`, checked against the file where
    /// this process can read it, else read from the file; a file it cannot read needs it given.
    static func vapidPublicKey(file: String?, given: String?) throws -> String? {
        guard let file else {
            if given != nil { throw ValidationError("--vapid-public-key goes with --vapid-key-file") }
            return nil
        }
        if let given {
            do {
                _ = try WebPushSubscription.userAgentKey(given)
            } catch {
                throw ValidationError("--vapid-public-key: \(error.reason)")
            }
        }
        guard FileManager.default.isReadableFile(atPath: file) else {
            guard let given else {
                throw ValidationError(
                    "\(file) cannot be read here: give --vapid-public-key (as pushchat-api webpush generate-key printed it)"
                )
            }
            return given
        }
        let key: VAPIDKey
        do {
            key = try VAPIDKey(file: file)
        } catch {
            throw ValidationError("--vapid-key-file \(file): \(error.reason)")
        }
        if let given, given != key.publicKey { throw ValidationError("--vapid-public-key is not \(file)'s public half") }
        return key.publicKey
    }

    static func describe(_ settings: App.Settings) -> String {
        let credentials =
            switch settings.credentials {
            case .token(_, let key, let team): "signing key \(key) of team \(team)"
            case .certificate: "a client certificate"
            }
        let android = settings.fcmServiceAccountFile == nil ? "" : ", and Android devices over FCM"
        let browsers = settings.webPushVAPIDKeyFile == nil ? "" : ", and browsers over Web Push"
        return
            "\(settings.bundleID) in \(settings.environment.rawValue) over \(settings.transport.rawValue) with \(credentials)\(android)\(browsers)"
    }
}
