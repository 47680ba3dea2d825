// swift-tools-version:6.1
import PackageDescription

/// One settings list shared by every target: Swift 6 language mode and strict concurrency everywhere.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

// Products of the packages below, by the name the targets use.
let argumentParser = Target.Dependency.product(name: "ArgumentParser", package: "swift-argument-parser")
let crypto = Target.Dependency.product(name: "Crypto", package: "swift-crypto")
let cryptoExtras = Target.Dependency.product(name: "_CryptoExtras", package: "swift-crypto")
let hummingbird = Target.Dependency.product(name: "Hummingbird", package: "hummingbird")
let hummingbirdTLS = Target.Dependency.product(name: "HummingbirdTLS", package: "hummingbird")
let hummingbirdCore = Target.Dependency.product(name: "HummingbirdCore", package: "hummingbird")
let logging = Target.Dependency.product(name: "Logging", package: "swift-log")
let metrics = Target.Dependency.product(name: "Metrics", package: "swift-metrics")
let coreMetrics = Target.Dependency.product(name: "CoreMetrics", package: "swift-metrics")
let httpTypes = Target.Dependency.product(name: "HTTPTypes", package: "swift-http-types")
let multipartKit = Target.Dependency.product(name: "MultipartKit", package: "multipart-kit")
let nioConcurrencyHelpers = Target.Dependency.product(name: "NIOConcurrencyHelpers", package: "swift-nio")
let nioCore = Target.Dependency.product(name: "NIOCore", package: "swift-nio")
let nioEmbedded = Target.Dependency.product(name: "NIOEmbedded", package: "swift-nio")
let nioHTTP1 = Target.Dependency.product(name: "NIOHTTP1", package: "swift-nio")
let nioHTTP2 = Target.Dependency.product(name: "NIOHTTP2", package: "swift-nio-http2")
let nioHPACK = Target.Dependency.product(name: "NIOHPACK", package: "swift-nio-http2")
let nioHTTPTypesHTTP1 = Target.Dependency.product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras")
let nioPosix = Target.Dependency.product(name: "NIOPosix", package: "swift-nio")
let nioSSL = Target.Dependency.product(name: "NIOSSL", package: "swift-nio-ssl")
let nioTLS = Target.Dependency.product(name: "NIOTLS", package: "swift-nio")
let postgres = Target.Dependency.product(name: "PostgresNIO", package: "postgres-nio")
let prometheus = Target.Dependency.product(name: "Prometheus", package: "swift-prometheus")
let serviceLifecycle = Target.Dependency.product(name: "ServiceLifecycle", package: "swift-service-lifecycle")
let unixSignals = Target.Dependency.product(name: "UnixSignals", package: "swift-service-lifecycle")
let nioFoundationCompat = Target.Dependency.product(name: "NIOFoundationCompat", package: "swift-nio")
let asyncHTTPClient = Target.Dependency.product(name: "AsyncHTTPClient", package: "async-http-client")

let package = Package(
    name: "pushchat-server",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "pushchat-api", targets: ["APIServer"]),
        .executable(name: "pushchat-push", targets: ["PushDaemon"]),
        .executable(name: "pushchat-feedback", targets: ["FeedbackJob"]),
        .executable(name: "pushchat-apns-sim", targets: ["APNsSimulator"]),
        .executable(name: "pushchat-bench", targets: ["Bench"]),
        .executable(name: "pushchat-fuzz", targets: ["Fuzz"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/vapor/multipart-kit.git", from: "4.7.1"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
    ],
    targets: [
        // Libraries, lowest first (docs/ARCHITECTURE.md says what each may import).
        .target(name: "Support", dependencies: [nioConcurrencyHelpers, nioCore, nioPosix], swiftSettings: swiftSettings),
        // The C allocator's statistics (glibc's mallinfo2), for Observability.
        .target(name: "CAllocator"),
        .target(
            name: "Observability",
            dependencies: ["Support", "CAllocator", logging, metrics, coreMetrics, prometheus, nioConcurrencyHelpers],
            swiftSettings: swiftSettings
        ),
        // Hummingbird answers the servers share (plain text, the metrics exposition), apart from Observability so
        // only the modules that serve HTTP link Hummingbird.
        .target(name: "HTTPServing", dependencies: ["Observability", hummingbird, nioCore], swiftSettings: swiftSettings),
        .target(
            name: "Settings",
            dependencies: ["Support", "Observability", argumentParser, logging, nioSSL],
            swiftSettings: swiftSettings
        ),
        // The daemon's HTTP/2 client (frames, HPACK, windows, the stream state machine, the channel handler, the
        // connector), for every destination that speaks HTTP/2: knows nothing of Apple's or Google's values.
        .target(
            name: "HTTP2Client",
            dependencies: [
                "Support", "Settings", logging, nioCore, nioPosix, nioSSL, nioTLS, nioHTTP2, nioHPACK, nioConcurrencyHelpers,
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "APNs",
            dependencies: [
                "HTTP2Client", "Support", "Settings", logging, nioCore, nioPosix, nioSSL, nioTLS, nioHTTP2, nioHPACK, crypto,
                nioConcurrencyHelpers,
            ],
            swiftSettings: swiftSettings
        ),
        // Firebase Cloud Messaging's protocol values (service accounts, OAuth assertions, messages, answers): no I/O.
        .target(name: "FCM", dependencies: ["Support", crypto, cryptoExtras], swiftSettings: swiftSettings),
        .target(name: "Webhooks", dependencies: ["Support", crypto], swiftSettings: swiftSettings),
        .target(name: "WebPush", dependencies: ["Support", crypto, nioCore], swiftSettings: swiftSettings),
        .target(
            name: "APNsTransport",
            dependencies: [
                "APNs", "HTTP2Client", "Support", "Settings", logging, nioCore, nioPosix, nioSSL, nioTLS, nioHTTP2, nioHPACK,
                nioConcurrencyHelpers,
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Storage",
            dependencies: [
                "Support", "Settings", "APNs", postgres, logging, serviceLifecycle, nioCore, nioPosix, nioSSL, nioConcurrencyHelpers,
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "API",
            dependencies: [
                "Support", "Settings", "Observability", "HTTPServing", "APNs", "Storage", "FCM", "WebPush",
                hummingbird, hummingbirdCore, hummingbirdTLS, httpTypes, nioSSL, multipartKit, nioCore, nioHTTP1, nioHTTPTypesHTTP1,
                nioConcurrencyHelpers, postgres, logging, metrics, crypto, serviceLifecycle,
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Push",
            dependencies: [
                "Support", "Settings", "Observability", "HTTPServing", "APNs", "APNsTransport", "HTTP2Client", "Storage", "FCM",
                "Webhooks", "WebPush", hummingbird, postgres, serviceLifecycle, logging, metrics, coreMetrics, nioCore, nioPosix, nioSSL,
                nioHTTP2,
                nioHPACK,
                nioConcurrencyHelpers, nioHTTP1, asyncHTTPClient,
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Feedback",
            dependencies: [
                "Support", "Settings", "Observability", "APNs", "APNsTransport", "HTTP2Client", "Storage", postgres, nioCore, nioSSL,
                logging, coreMetrics,
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Simulator",
            dependencies: [
                "Support", "Settings", "APNs", "APNsTransport", "HTTP2Client", "FCM", "Webhooks", "WebPush", hummingbird, httpTypes,
                nioCore, nioPosix, nioSSL, nioTLS, nioHTTP1, nioHTTP2, nioHPACK,
                crypto, cryptoExtras, serviceLifecycle,
                logging, nioConcurrencyHelpers,
            ],
            swiftSettings: swiftSettings
        ),
        // Executables: parse arguments, call a library.
        .executableTarget(
            name: "APIServer",
            dependencies: [
                "API", "Settings", "Storage", "APNs", "Support", "Observability", "Webhooks", "WebPush", argumentParser, hummingbird,
                logging,
                postgres,
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "PushDaemon",
            dependencies: ["Push", "Settings", "Storage", argumentParser, logging, serviceLifecycle, unixSignals],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "FeedbackJob",
            dependencies: ["Feedback", "Settings", "Storage", "Support", "Observability", argumentParser, logging],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "APNsSimulator",
            dependencies: [
                "Simulator", "Settings", "Observability", "APNs", "Support", "FCM", argumentParser, logging, serviceLifecycle, unixSignals,
            ],
            swiftSettings: swiftSettings
        ),
        // The benchmark's figures, as a library: pushchat-bench only parses its options.
        .target(
            name: "Benchmarks",
            dependencies: [
                "Support", "Settings", "Observability", "APNs", "APNsTransport", "Storage", "Simulator", "Push", "FCM", "WebPush", crypto,
                postgres, logging,
                nioCore, nioPosix, nioHTTP1, nioSSL, nioConcurrencyHelpers,
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "Bench",
            dependencies: ["Benchmarks", "Settings", "Storage", argumentParser, logging],
            swiftSettings: swiftSettings
        ),
        // libFuzzer entry points for the parsers of untrusted bytes (scripts/fuzz.sh); a corpus replayer otherwise.
        .executableTarget(
            name: "Fuzz",
            dependencies: [
                "API", "APNs", "APNsTransport", "HTTP2Client", "FCM", "Settings", "Support", "WebPush", crypto, nioCore, nioEmbedded,
                nioHTTP2,
            ],
            swiftSettings: swiftSettings
        ),
        // Pure unit tests, one target per library; integration tests (PostgreSQL, sockets, executables) apart.
        .testTarget(name: "SupportTests", dependencies: ["Support"], swiftSettings: swiftSettings),
        .testTarget(
            name: "ObservabilityTests",
            dependencies: ["Observability", "Settings", "Support", logging],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "SettingsTests", dependencies: ["Settings", "Support", logging, nioSSL], swiftSettings: swiftSettings),
        .testTarget(
            name: "APNsTests",
            dependencies: [
                "APNs", "APNsTransport", "HTTP2Client", "Settings", "Support", nioCore, nioEmbedded, nioHTTP2, nioHPACK, nioTLS, crypto,
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "FCMTests", dependencies: ["FCM", "Support", cryptoExtras], swiftSettings: swiftSettings),
        .testTarget(name: "WebhooksTests", dependencies: ["Webhooks", "Support"], swiftSettings: swiftSettings),
        .testTarget(name: "WebPushTests", dependencies: ["WebPush", "Support", crypto], swiftSettings: swiftSettings),
        .testTarget(
            name: "StorageTests",
            dependencies: ["Storage", "Settings", postgres, nioCore, nioEmbedded],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APITests",
            dependencies: [
                "API", "APNs", "Settings", "Storage", "Support", hummingbirdCore, httpTypes, nioConcurrencyHelpers, nioCore, nioEmbedded,
                nioHTTP1,
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PushTests",
            dependencies: [
                "Push", "APNs", "APNsTransport", "HTTP2Client", "Observability", "Settings", "Storage", "Support", logging,
                nioConcurrencyHelpers, nioCore,
                nioHPACK,
                nioPosix, nioSSL,
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "SimulatorUnitTests", dependencies: ["Simulator", "WebPush", "Support", crypto], swiftSettings: swiftSettings),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "Support", "Settings", "Observability", "APNs", "APNsTransport", "HTTP2Client", "Storage", "API", "APIServer", "Simulator",
                "Push",
                "Feedback", "FCM", "Webhooks", "WebPush", crypto, cryptoExtras,
                .product(name: "HummingbirdTesting", package: "hummingbird"), hummingbird, httpTypes, logging, serviceLifecycle,
                nioConcurrencyHelpers, postgres, nioCore, nioFoundationCompat, nioPosix, nioSSL, nioHTTP2,
            ],
            swiftSettings: swiftSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
