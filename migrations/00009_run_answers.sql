-- +goose Up
-- bothy:requires 9
-- The answers an agent posted naming a run (run_id): the record an adapter
-- taking over reads (Run.answers) to see what the previous holder already
-- said. The anchor and cards are not answers. client_msg_id is the key the
-- answer was sent with, kept here so that reading the answers needs no
-- other module's table.
CREATE TABLE run_answers (
    run_id         uuid NOT NULL REFERENCES runs (id),
    message_id     uuid NOT NULL REFERENCES messages (id),
    client_msg_id  text NOT NULL,
    created_at     timestamptz NOT NULL,
    PRIMARY KEY (run_id, message_id)
);

-- +goose Down
DROP TABLE run_answers;
