import Foundation
import Testing

@testable import Storage

@Suite struct SQLScriptTests {
    @Test func splitsOnSemicolons() {
        #expect(SQLScript("SELECT 1; SELECT 2;\n\nSELECT 3").statements == ["SELECT 1", "SELECT 2", "SELECT 3"])
    }

    @Test func keepsSemicolonsInsideQuotesAndComments() {
        let script = """
            -- a comment; still a comment
            INSERT INTO t VALUES ('a;b', 'it''s; fine', E'back\\';slash');
            /* block; /* nested; */ still comment; */ SELECT "odd;name" FROM t;
            """
        #expect(SQLScript(script).statements.count == 2)
        #expect(SQLScript(script).statements[0].hasSuffix("E'back\\';slash')"))
        #expect(SQLScript(script).statements[1].hasSuffix("SELECT \"odd;name\" FROM t"))
    }

    @Test func keepsDollarQuotedBodiesWhole() {
        let script = """
            CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM 1; RETURN NULL; END; $$;
            CREATE FUNCTION g() RETURNS text LANGUAGE sql AS $body$ SELECT 'x;$$;y' $body$;
            SELECT $1::int;
            """
        let statements = SQLScript(script).statements
        #expect(statements.count == 3)
        #expect(statements[0].hasSuffix("END; $$"))
        #expect(statements[1].hasSuffix("$body$"))
        #expect(statements[2] == "SELECT $1::int")
    }

    @Test func dropsCommentOnlyPieces() {
        #expect(SQLScript("-- only a comment\n;\n/* and this */").statements.isEmpty)
    }

    @Test func theInitialMigrationSplitsIntoWholeStatements() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let migrations = try Migration.load(from: root.appendingPathComponent("migrations").path)
        let first = try #require(migrations.first)
        #expect(first.version == 1)
        let statements = SQLScript(first.sql).statements
        #expect(statements.contains { $0.hasPrefix("CREATE FUNCTION push_queue_notify()") && $0.hasSuffix("$$") })
        #expect(statements.allSatisfy { !$0.isEmpty && !$0.hasPrefix("--") })
    }
}
