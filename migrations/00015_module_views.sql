-- +goose Up
-- bothy:requires 14
-- Module boundaries in the schema, not in Go strings (docs/DECISIONS.md,
-- 2026-12-04): where one statement of a module must read a neighbour's
-- rows, the neighbour shares a named view (or, with parameters, a
-- function) that it owns, like active_runs (00012). Each object below
-- names its owning module and its readers; only the owner names its
-- tables (internal/platform/db/ownership_test.go: owners and shared). The
-- owner's own tests read every column its readers use from a row they
-- wrote, so a renamed or dropped view column fails the owner's test, not
-- a request. PostgreSQL keeps the rest honest: a later migration that
-- drops a table column a view or a BEGIN ATOMIC function below uses fails
-- ("cannot drop column ... because other objects depend on it") until it
-- replaces the view; renaming a table column keeps the view's own column
-- names, which are the contract. An expand step: views and a function
-- only, which no older binary reads.

-- principal_facts: identity's principals with the columns that
-- identity.PrincipalRow scans, in its order (email '' when absent).
-- Owner: identity. Read by: authz (the people of a run context beside
-- their grants).
CREATE VIEW principal_facts AS
    SELECT id, kind, handle, display_name, coalesce(email, '') AS email, status, is_owner, created_at FROM principals;

-- group_memberships: who is in which group. Owner: identity. Read by:
-- authz (grants to groups, in the one statement of a decision, and
-- grant_levels below).
CREATE VIEW group_memberships AS
    SELECT group_id, principal_id FROM group_members;

-- thread_places: every thread with its channel and space. Owner: chat.
-- Read by: runs (active runs and follow-ups scoped by channel or space).
CREATE VIEW thread_places AS
    SELECT t.id, t.channel_id, c.space_id FROM threads t JOIN channels c ON c.id = t.channel_id;

-- thread_info: every thread with its current channel and that channel's
-- space facts, columns ti_* in the order chat.ThreadInfoDest scans (the
-- prefix keeps them apart from the reader's own columns). Owner: chat
-- (chat.ThreadInfo reads it too). Read by: runs (a run with its thread in
-- one statement).
CREATE VIEW thread_info AS
    SELECT t.id AS ti_thread_id, t.channel_id AS ti_channel_id, t.kind AS ti_kind,
        coalesce(t.parent_message_id::text, '') AS ti_parent_message_id, coalesce(t.operator_agent_id::text, '') AS ti_thread_operator,
        coalesce(t.title, '') AS ti_title, coalesce(t.title_source, '') AS ti_title_source, t.created_by AS ti_created_by,
        t.state AS ti_state, t.last_seq AS ti_last_seq, t.created_at AS ti_created_at,
        c.id AS ti_cid, c.space_id AS ti_space_id, c.name AS ti_channel_name, c.kind AS ti_channel_kind, c.archived_at AS ti_archived_at,
        c.operator_mode AS ti_operator_mode, coalesce(c.operator_agent_id::text, '') AS ti_channel_operator, c.free_response AS ti_free_response,
        c.allow_mentioned_agents AS ti_allow_mentioned_agents, c.auto_thread AS ti_auto_thread, c.history_backfill_limit AS ti_history_backfill_limit,
        coalesce(s.default_operator_agent_id::text, '') AS ti_space_default_operator, s.archived_at IS NOT NULL AS ti_space_archived,
        coalesce((SELECT m.id::text FROM threads m WHERE m.channel_id = c.id AND m.kind = 'main'), '') AS ti_main_thread_id
    FROM threads t JOIN channels c ON c.id = t.channel_id JOIN spaces s ON s.id = c.space_id;

-- message_facts: where every message lies and who wrote it. Owner:
-- messaging. Read by: runs (follow-ups in thread order, scoped by
-- author).
CREATE VIEW message_facts AS
    SELECT id, thread_id, thread_seq, author_principal_id FROM messages;

-- agent_event_facts: the agent streams without payloads. Owner: events.
-- Read by: runs (follow-ups delivered when an agent acknowledges them).
CREATE VIEW agent_event_facts AS
    SELECT agent_id, seq, type, run_id, message_id FROM agent_events;

-- ended_runs: the ids of the runs that have ended (the complement of
-- active_runs among the runs; the states are domain.ActiveRunStates,
-- which a test of internal/runs/domain compares). Owner: runs. Read by:
-- events (retention keeps the agent events of runs not ended).
CREATE VIEW ended_runs AS
    SELECT id FROM runs WHERE state NOT IN ('queued', 'running', 'waiting_input');

-- grant_levels: the levels of the grants live at live_at (not revoked,
-- not expired) that principal holder holds, directly or through a group,
-- on space or channel: the grant rule of every decision of the door
-- (authz's liveGrants; TestGrantLevels compares the two). Owner: authz.
-- Read by: runs (a run with its reader's grant levels in one statement).
-- A set-returning SQL function, STABLE and not STRICT, so the planner
-- inlines it into the reader's statement like a view; its body is
-- BEGIN ATOMIC, so PostgreSQL records what it uses (a dropped column
-- fails the migration that drops it, as for a view).
-- +goose StatementBegin
CREATE FUNCTION grant_levels(live_at timestamptz, holder uuid, space uuid, channel uuid)
    RETURNS TABLE (level text) LANGUAGE sql STABLE
BEGIN ATOMIC
    SELECT g.level FROM grants g
        WHERE g.subject_principal_id = grant_levels.holder
        AND g.revoked_at IS NULL AND (g.expires_at IS NULL OR g.expires_at > grant_levels.live_at)
        AND (g.target_space_id = grant_levels.space OR g.target_channel_id = grant_levels.channel)
    UNION ALL
    SELECT g.level FROM group_memberships gm JOIN grants g ON g.subject_group_id = gm.group_id
        WHERE gm.principal_id = grant_levels.holder
        AND g.revoked_at IS NULL AND (g.expires_at IS NULL OR g.expires_at > grant_levels.live_at)
        AND (g.target_space_id = grant_levels.space OR g.target_channel_id = grant_levels.channel);
END;
-- +goose StatementEnd

-- context_authors: the authors of what a run context reads in one
-- statement (messaging.ContextMessagesAndWindow): the rows of the thread
-- window of thread between floor and ceiling (exclusive), newest first,
-- at most lim of them (the extra row that tells has_older included), not
-- deleted, no run anchors, without the author exclude; and the messages
-- wanted by id. Owner: messaging (its window rule; TestContextWindow
-- compares the function with the window read). Read by: authz (the people
-- of a run context and their grants, read beside the window, through
-- authz.Relation). SQL, STABLE, BEGIN ATOMIC: inlined like a view, and
-- its uses recorded.
-- +goose StatementBegin
CREATE FUNCTION context_authors(thread uuid, floor bigint, ceiling bigint, lim int, exclude uuid, wanted uuid[])
    RETURNS TABLE (author_principal_id uuid) LANGUAGE sql STABLE
BEGIN ATOMIC
    SELECT w.author_principal_id FROM (SELECT m.author_principal_id, m.thread_seq FROM messages m
        WHERE m.thread_id = context_authors.thread AND m.thread_seq > context_authors.floor AND m.thread_seq < context_authors.ceiling
        AND m.deleted_at IS NULL AND m.kind <> 'run'
        AND (context_authors.exclude IS NULL OR m.author_principal_id <> context_authors.exclude)
        ORDER BY m.thread_seq DESC LIMIT context_authors.lim) w
    UNION
    SELECT m.author_principal_id FROM messages m WHERE m.id = ANY (context_authors.wanted);
END;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION context_authors(uuid, bigint, bigint, int, uuid, uuid[]);
DROP FUNCTION grant_levels(timestamptz, uuid, uuid, uuid);
DROP VIEW ended_runs;
DROP VIEW agent_event_facts;
DROP VIEW message_facts;
DROP VIEW thread_info;
DROP VIEW thread_places;
DROP VIEW group_memberships;
DROP VIEW principal_facts;
