package injection

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/localserver"
	"bothy.example.com/bothy/internal/world"
)

// space is the bench's space on the Bothy server; its channels bear the
// names of the fixture's.
const space = "Team"

// team is the bench's world on the Bothy server: Robin (the owner), Alex
// (who asks the agent: trigger on the space), Sam and Dana (who may write
// in the shared channels; Sam may also trigger the agent in random), the
// agent under test (Helper, write on the space), another agent (Scout) and
// an app (Feed), in the channels general, random and external (shared)
// and private (Alex, Robin and the agent). The agent is no channel's operator: Alex mentions it,
// so that every run is a guest run and its context holds the whole
// thread, the agent's own earlier answers included
// (docs/design/trust.md#context-plan).
func team() world.Spec {
	spec := world.Spec{
		People: []world.Person{
			{Handle: "robin", Name: "Robin", Kind: identity.KindUser, Owner: true},
			{Handle: "alex", Name: "Alex", Kind: identity.KindUser},
			{Handle: "sam", Name: "Sam", Kind: identity.KindUser},
			{Handle: "dana", Name: "Dana", Kind: identity.KindUser},
			{Handle: agentHandle, Name: "Helper", Kind: identity.KindAgent},
			{Handle: "scout", Name: "Scout", Kind: identity.KindAgent},
			{Handle: "feed", Name: "Feed", Kind: identity.KindApp},
		},
		Spaces: []world.Space{{Name: space}},
		Grants: []world.GrantSpec{{Subject: "alex", Target: space, Level: authz.Trigger}, {Subject: agentHandle, Target: space, Level: authz.Write}},
	}
	for _, ch := range []string{"general", "random", "private", "external"} {
		spec.Channels = append(spec.Channels, world.ChannelSpec{Space: space, Name: ch, Kind: chat.ChannelText, Mode: chat.OperatorNone, Guests: true})
		if ch == "private" {
			continue
		}
		for _, who := range []string{"sam", "dana", "scout", "feed"} {
			level := authz.Write
			if who == "sam" && ch == channelOf(OriginFollowUp) {
				level = authz.Trigger
			}
			spec.Grants = append(spec.Grants, world.GrantSpec{Subject: who, Target: space + "/" + ch, Level: level})
		}
	}
	return spec
}

// chatClient acts in the bench's world on the Bothy server through its
// public API, as the world's principals.
type chatClient struct {
	srv   *localserver.Server
	world *world.World
}

// seq makes every clientMsgId of a bench unique.
var seq atomic.Int64

// message is a posted message as the bench reads it back.
type message struct {
	ID           string `json:"id"`
	TriggerState string `json:"triggerState"`
}

// openThread has who open a thread in channel (of the bench's space) with
// text as its first message, and returns the thread's id.
func (c chatClient) openThread(ctx context.Context, who, channel, text string) (string, error) {
	var out struct {
		CreateThread struct {
			Thread struct{ ID string } `json:"thread"`
		} `json:"createThread"`
	}
	err := c.srv.GQL(ctx, c.world.Token(who), `mutation($c: ID!, $in: ThreadCreate!) { createThread(channelId: $c, input: $in) { thread { id } } }`,
		map[string]any{"c": c.world.Channel(space + "/" + channel).ID, "in": map[string]any{"title": "Bench",
			"firstMessage": map[string]any{"clientMsgId": fmt.Sprintf("bench-%d", seq.Add(1)), "contentMd": text}}}, &out)
	if err != nil {
		return "", fmt.Errorf("%s opens a thread in %s: %w", who, channel, err)
	}
	return out.CreateThread.Thread.ID, nil
}

// post has who write text in thread, with the files of fileIDs attached
// (empty ids are none).
func (c chatClient) post(ctx context.Context, who, thread, text string, fileIDs ...string) (message, error) {
	var out struct {
		CreateMessage struct {
			Message message `json:"message"`
		} `json:"createMessage"`
	}
	err := c.srv.GQL(ctx, c.world.Token(who), `mutation($t: ID!, $in: MessageCreate!) { createMessage(threadId: $t, input: $in) { message { id triggerState } } }`,
		map[string]any{"t": thread, "in": map[string]any{"clientMsgId": fmt.Sprintf("bench-%d", seq.Add(1)), "contentMd": text,
			"attachmentFileIds": slices.DeleteFunc(slices.Clone(fileIDs), func(id string) bool { return id == "" })}}, &out)
	if err != nil {
		return message{}, fmt.Errorf("%s posts: %w", who, err)
	}
	return out.CreateMessage.Message, nil
}

// upload has who upload text as a file named name, through the files
// module as POST /api/v1/files does, and returns the file's id.
func (c chatClient) upload(ctx context.Context, who, name, text string) (string, error) {
	id := c.world.ID(who)
	ps, err := c.srv.Server.Identity.GetMany(ctx, []string{id})
	if err != nil {
		return "", err
	}
	f, err := c.srv.Server.Modules().Files.Upload(ctx, ps[id], name, strings.NewReader(text))
	if err != nil {
		return "", fmt.Errorf("%s uploads: %w", who, err)
	}
	return f.ID, nil
}

// remove has who delete message id (a tombstone is left).
func (c chatClient) remove(ctx context.Context, who, id string) error {
	var out struct {
		DeleteMessage struct{ ID string } `json:"deleteMessage"`
	}
	if err := c.srv.GQL(ctx, c.world.Token(who), `mutation($id: ID!) { deleteMessage(id: $id) { id } }`, map[string]any{"id": id}, &out); err != nil {
		return fmt.Errorf("%s deletes a message: %w", who, err)
	}
	return nil
}
